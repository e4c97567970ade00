from django.urls import path

from dashboard.views import (
    agents,
    audit,
    escalations,
    identity,
    notify,
    notify_actions,
    overview,
    policy,
    replays,
    task_pages,
    trace_list,
    traces,
    traffic,
)

app_name = "dashboard"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("traffic/", traffic.traffic, name="traffic"),
    # agents
    path("agents/", agents.agent_list, name="agents"),
    path("agents/<slug:slug>/", agents.agent_detail, name="agent"),
    path("agents/<slug:slug>/suspend/", agents.agent_suspend, name="agent_suspend"),
    path("agents/<slug:slug>/resume/", agents.agent_resume, name="agent_resume"),
    path("agents/<slug:slug>/token/", agents.agent_token, name="agent_token"),
    path("agents/<slug:slug>/credentials/", agents.agent_credentials, name="agent_credentials"),
    path(
        "agents/<slug:slug>/credentials/clear/",
        agents.agent_credentials_clear,
        name="agent_credentials_clear",
    ),
    # tasks
    path("tasks/", task_pages.task_list, name="tasks"),
    path("tasks/<str:task_id>/", task_pages.task_page, name="task"),
    # Agents choose context ids: any text, slashes included.
    path("tasks/<str:task_id>/trace/", traces.task_trace, name="task_trace"),
    path("traces/", trace_list.trace_list, name="traces"),
    path("traces/<str:trace_id>/", traces.trace_page, name="trace"),
    path("traces/<str:trace_id>/spans/<str:task_id>/", traces.span_panel, name="span"),
    # replays
    path("replays/", replays.replay_list, name="replays"),
    path("replays/new/", replays.replay_new, name="replay_new"),
    path("replays/make/", replays.replay_create, name="replay_create"),
    path("replays/<int:set_id>/", replays.replay_page, name="replay"),
    path("replays/<int:set_id>/rerun/", replays.replay_rerun, name="replay_rerun"),
    path("replays/<int:set_id>/export.jsonl", replays.replay_export, name="replay_export"),
    path("contexts/<path:context_id>/trace/", traces.context_trace_page, name="context_trace"),
    path("contexts/<path:context_id>/", task_pages.conversation_page, name="conversation"),
    # audit
    path("audit/", audit.audit, name="audit"),
    path("audit/export.jsonl", audit.audit_export, name="audit_export"),
    path("audit/training.jsonl", audit.audit_training, name="audit_training"),
    path("messages/<int:pk>/", audit.message_detail, name="message"),
    # escalations
    path("escalations/", escalations.escalation_list, name="escalations"),
    path("escalations/<int:pk>/", escalations.escalation_detail, name="escalation"),
    path("escalations/<int:pk>/answer/", escalations.escalation_answer, name="escalation_answer"),
    path(
        "escalations/<int:pk>/approve/", escalations.escalation_approve, name="escalation_approve"
    ),
    path(
        "escalations/<int:pk>/redirect/",
        escalations.escalation_redirect,
        name="escalation_redirect",
    ),
    path("escalations/<int:pk>/reject/", escalations.escalation_reject, name="escalation_reject"),
    path("escalations/<int:pk>/claim/", escalations.escalation_claim, name="escalation_claim"),
    path(
        "escalations/<int:pk>/release/", escalations.escalation_release, name="escalation_release"
    ),
    path("escalations/bulk/", escalations.escalation_bulk, name="escalation_bulk"),
    path("escalations/notify/", notify.notify_targets, name="notify"),
    path("escalations/notify/add/", notify.notify_add, name="notify_add"),
    path("escalations/notify/<int:pk>/remove/", notify.notify_remove, name="notify_remove"),
    path("escalations/notify/<int:pk>/test/", notify.notify_test, name="notify_test"),
    path("escalations/notify/<int:pk>/", notify.notify_change, name="notify_change"),
    # deciding where people are told: an email's links, Slack's buttons
    path("notify/act/<str:token>/", notify_actions.notify_act, name="notify_act"),
    path("notify/slack/actions/", notify_actions.slack_actions, name="notify_slack"),
    # policy
    path("policy/", policy.policy, name="policy"),
    path("policy/draft/", policy.policy_draft, name="policy_draft"),
    path("policy/save/", policy.policy_save, name="policy_save"),
    path("policy/dry-run/", policy.policy_dry_run, name="policy_dry_run"),
    path("policy/versions/<int:number>/", policy.policy_version, name="policy_version"),
    path("policy/versions/<int:number>/rollback/", policy.policy_rollback, name="policy_rollback"),
    # identity providers
    path("issuers/", identity.issuer_list, name="issuers"),
    path("issuers/add/", identity.issuer_add, name="issuer_add"),
    path("issuers/remove/", identity.issuer_remove, name="issuer_remove"),
]
