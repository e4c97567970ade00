from django.urls import path

from dashboard.views import agents, placeholder, traffic

app_name = "dashboard"

P = placeholder.placeholder

urlpatterns = [
    path("", P, name="overview"),
    path("traffic/", traffic.traffic, name="traffic"),
    # agents
    path("agents/", agents.agent_list, name="agents"),
    path("agents/<slug:slug>/", agents.agent_detail, name="agent"),
    path("agents/<slug:slug>/suspend/", agents.agent_suspend, name="agent_suspend"),
    path("agents/<slug:slug>/resume/", agents.agent_resume, name="agent_resume"),
    path("agents/<slug:slug>/token/", agents.agent_token, name="agent_token"),
    # tasks
    path("tasks/", P, name="tasks"),
    path("tasks/<str:task_id>/", P, name="task"),
    path("contexts/<str:context_id>/", P, name="conversation"),
    # audit
    path("audit/", P, name="audit"),
    path("audit/export.jsonl", P, name="audit_export"),
    path("audit/training.jsonl", P, name="audit_training"),
    path("messages/<int:pk>/", P, name="message"),
    # escalations
    path("escalations/", P, name="escalations"),
    path("escalations/<int:pk>/answer/", P, name="escalation_answer"),
    path("escalations/<int:pk>/approve/", P, name="escalation_approve"),
    path("escalations/<int:pk>/redirect/", P, name="escalation_redirect"),
    path("escalations/<int:pk>/reject/", P, name="escalation_reject"),
    # policy
    path("policy/", P, name="policy"),
    path("policy/save/", P, name="policy_save"),
    path("policy/dry-run/", P, name="policy_dry_run"),
    path("policy/versions/<int:number>/", P, name="policy_version"),
    path("policy/versions/<int:number>/rollback/", P, name="policy_rollback"),
]
