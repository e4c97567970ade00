"""Working the escalation inbox as a team: who decided (by name, everywhere), filters and
search kept in the URL, identical held messages folded, claims, and decisions in bulk."""

from __future__ import annotations

import re

import pytest

from a2a_core.models import AuditEvent, Escalation, Message
from a2a_core.services.escalation_triage import BULK_CHUNK
from tests.dashboard.test_escalations import post
from tests.factories import held_escalation as held
from tests.factories import question_escalation as question
from tests.factories import register

pytestmark = pytest.mark.django_db


def pending_ids(html: str) -> list[int]:
    """The ids of the pending cards shown, in order."""
    start = html.index('id="escalation-list"')
    end = html.find("Recently decided", start)
    section = html[start : end if end > 0 else len(html)]
    return [int(pk) for pk in re.findall(r'<article id="escalation-(\d+)"', section)]


# --- who decided ----------------------------------------------------------------------------


def test_a_decision_reads_as_made_by_its_operator_in_the_feed_the_log_and_the_task(as_role):
    approved, redirected = held("ship it"), held("move it", caller="beta")
    register("other")
    operator = as_role("operator")
    post(operator, f"/escalations/{approved.pk}/approve/")
    post(operator, f"/escalations/{redirected.pk}/redirect/", {"to": "other"})

    feed = operator.get("/traffic/").content.decode()
    assert "approved by operator at " in feed and "redirected to other by operator at " in feed
    assert '<span class="badge hold">' not in feed
    log = operator.get("/audit/").content.decode()
    assert "approved by operator at " in log
    task = operator.get(f"/tasks/{approved.task_id}/").content.decode()
    assert "Approved by operator at " in task
    inbox = operator.get("/escalations/").content.decode()
    assert 'Approved by <strong class="decider">operator</strong>' in inbox
    message = Message.objects.get(pk=approved.message_id)
    assert (message.decision, message.decision_reason) == ("deliver", "approved_by_human")


# --- filters, search, sort, grouping, folding -------------------------------------------------


def test_filters_and_search_narrow_the_inbox_and_the_url_holds_the_view(as_role):
    deploy = held("deploy the migration", caller="alpha", priority="high")
    held("rotate the keys", caller="beta")
    asked = question("which region?", agent="duc")
    viewer = as_role("viewer")

    every = pending_ids(viewer.get("/escalations/").content.decode())
    assert sorted(every) == sorted([deploy.pk, asked.pk, deploy.pk + 1])
    assert pending_ids(viewer.get("/escalations/?q=migration").content.decode()) == [deploy.pk]
    assert pending_ids(viewer.get("/escalations/?kind=input_required").content.decode()) == [
        asked.pk
    ]
    assert pending_ids(viewer.get("/escalations/?pair=alpha:echo").content.decode()) == [deploy.pk]
    assert pending_ids(viewer.get("/escalations/?agent=duc").content.decode()) == [asked.pk]
    assert pending_ids(viewer.get("/escalations/?priority=high").content.decode()) == [deploy.pk]
    assert pending_ids(viewer.get("/escalations/?age=1h").content.decode()) == []
    html = viewer.get("/escalations/?q=rotate&agent=beta&sort=deadline").content.decode()
    assert len(pending_ids(html)) == 1
    # The page's form shows the view it was opened with, so a shared link reproduces it.
    assert 'name="q" value="rotate"' in html
    assert "<option selected>beta</option>" in html
    assert '<option value="deadline" selected>' in html
    # Unknown values are dropped, not an error: the link still opens.
    assert viewer.get("/escalations/?sort=sideways&kind=%00").status_code == 200


def test_sort_by_deadline_puts_the_soonest_first():
    from datetime import timedelta

    from django.utils import timezone

    from a2a_core.selectors.escalations import escalation_inbox
    from a2a_core.selectors.inbox_filter import InboxFilter

    late, soon = held("late"), held("soon", caller="beta")
    Escalation.objects.filter(pk=soon.pk).update(deadline=timezone.now() + timedelta(minutes=2))
    inbox = escalation_inbox(filters=InboxFilter(sort="deadline"))
    assert [c.escalation.pk for c in inbox.pending] == [soon.pk, late.pk]


def test_identical_held_messages_fold_into_one_card_and_one_approval_decides_them_all(as_role):
    same = [held("apply migration 42", caller="alpha") for _ in range(3)]
    other = held("apply migration 43", caller="alpha")
    operator = as_role("operator")
    html = operator.get("/escalations/").content.decode()
    shown = pending_ids(html)
    assert len(shown) == 2 and other.pk in shown
    lead = next(pk for pk in shown if pk != other.pk)
    assert "\u00d73" in html and "Approve all 3" in html  # the fold count: times 3
    rest = re.search(r'name="also" value="([\d,]+)"', html).group(1)
    assert sorted(map(int, rest.split(","))) == sorted(e.pk for e in same if e.pk != lead)

    response = post(operator, f"/escalations/{lead}/approve/", {"also": rest})
    assert "So were 2 identical held messages." in response.content.decode()
    statuses = dict(Escalation.objects.values_list("pk", "status"))
    assert [statuses[e.pk] for e in same] == ["approved"] * 3
    assert statuses[other.pk] == "pending"


def test_grouping_by_agent_and_by_chain(as_role):
    root = held("root ask", caller="pm", target="architect")
    held("child ask", caller="architect", target="tester", parent=root.task)
    held("unrelated", caller="ops", target="prod")
    viewer = as_role("viewer")
    by_agent = viewer.get("/escalations/?group=agent").content.decode()
    assert by_agent.count('class="escalation-group"') == 3
    by_chain = viewer.get("/escalations/?group=chain").content.decode()
    assert by_chain.count('class="escalation-group"') == 2
    assert "pm → architect → tester" in by_chain


def test_a_group_counts_its_escalations_past_the_pages_limit():
    from a2a_core.selectors.escalations import escalation_inbox
    from a2a_core.selectors.inbox_filter import InboxFilter

    for i in range(3):
        held(f"deploy {i}", caller="alpha")
    held("other", caller="beta")
    inbox = escalation_inbox(filters=InboxFilter(group="agent", sort="oldest"), pending_limit=2)
    assert [(g.label, g.total, len(g.cards)) for g in inbox.groups] == [("alpha", 3, 2)]


# --- claims -----------------------------------------------------------------------------------


def test_a_claim_shows_who_is_on_it_and_can_be_released_or_taken_over(as_role, users):
    escalation = held()
    operator = as_role("operator")
    html = post(operator, f"/escalations/{escalation.pk}/claim/").content.decode()
    assert "you are on it" in html and "Release" in html
    seen_by_admin = as_role("admin").get("/escalations/").content.decode()
    assert "operator is on it" in seen_by_admin and "Take over" in seen_by_admin
    refused = post(as_role("admin"), f"/escalations/{escalation.pk}/claim/").content.decode()
    assert "is claimed by operator; take it over" in refused
    post(as_role("admin"), f"/escalations/{escalation.pk}/claim/", {"take_over": "1"})
    assert Escalation.objects.get(pk=escalation.pk).claimed_by_name == "admin"
    post(as_role("admin"), f"/escalations/{escalation.pk}/release/")
    assert Escalation.objects.get(pk=escalation.pk).claimed_by_name == ""
    assert as_role("viewer").get("/escalations/?state=claimed").status_code == 200


def test_a_viewer_may_not_claim(as_role):
    escalation = held()
    assert post(as_role("viewer"), f"/escalations/{escalation.pk}/claim/").status_code == 403
    assert Escalation.objects.get(pk=escalation.pk).claimed_by_name == ""


# --- bulk -------------------------------------------------------------------------------------


def test_bulk_approve_reject_and_redirect(as_role):
    batch = [held(f"m{i}", caller=f"c{i}") for i in range(5)]
    register("other")
    operator = as_role("operator")
    ids = [str(e.pk) for e in batch]
    html = post(
        operator, "/escalations/bulk/", {"ids": ids[:2], "action": "approve"}
    ).content.decode()
    assert "Approved 2 of 2." in html
    html = post(
        operator, "/escalations/bulk/", {"ids": ids[2:4], "action": "reject", "reason": " "}
    ).content.decode()
    assert "Nothing was changed: a reason is required" in html
    html = post(
        operator,
        "/escalations/bulk/",
        {"ids": [",".join(ids[1:4])], "action": "reject", "reason": "not today"},
    ).content.decode()
    assert (
        "Rejected 2 of 3." in html
        and f"#{batch[1].pk}: escalation {batch[1].pk} was already approved by operator" in html
    )
    post(operator, "/escalations/bulk/", {"ids": ids[4:], "action": "redirect", "to": "other"})
    statuses = [Escalation.objects.get(pk=e.pk).status for e in batch]
    assert statuses == ["approved", "approved", "rejected", "rejected", "redirected"]
    assert set(
        AuditEvent.objects.filter(action__startswith="escalation.").values_list(
            "actor_label", flat=True
        )
    ) == {"operator"}


def test_a_bulk_larger_than_one_commit_decides_each_once_and_skips_the_decided(as_role):
    batch = [held(f"m{i}", caller=f"c{i % 3}") for i in range(BULK_CHUNK + 10)]
    operator = as_role("operator")
    post(operator, f"/escalations/{batch[BULK_CHUNK].pk}/reject/", {"reason": "not that one"})
    ids = [str(e.pk) for e in reversed(batch)] + [str(batch[0].pk)]
    html = post(operator, "/escalations/bulk/", {"ids": ids, "action": "approve"}).content.decode()
    total = BULK_CHUNK + 10
    assert f"Approved {total - 1} of {total}." in html
    assert (
        f"#{batch[BULK_CHUNK].pk}: escalation {batch[BULK_CHUNK].pk} was already rejected" in html
    )
    statuses = [Escalation.objects.get(pk=e.pk).status for e in batch]
    assert statuses == ["approved"] * BULK_CHUNK + ["rejected"] + ["approved"] * 9
    assert AuditEvent.objects.filter(action="escalation.approve").count() == total - 1
    queued = Message.objects.filter(escalations__in=batch, delivery_state="queued")
    assert queued.count() == total - 1


# --- editing the whole message ---------------------------------------------------------------


def held_envelope(title: str = "Migrate the users table") -> Escalation:
    from a2a_core.schemas.envelopes import ENVELOPE_MEDIA_TYPE

    escalation = held("please migrate")
    envelope = {
        "kind": "task_request",
        "priority": "high",
        "payload": {"title": title, "acceptanceCriteria": ["no downtime"]},
    }
    Message.objects.filter(pk=escalation.message_id).update(
        parts=[
            {"text": "please migrate"},
            {"data": envelope, "mediaType": ENVELOPE_MEDIA_TYPE},
        ],
        envelope=envelope,
    )
    return escalation


def test_the_edit_form_is_generated_from_the_envelope_schema(as_role):
    escalation = held_envelope()
    html = as_role("operator").get("/escalations/").content.decode()
    assert 'name="part-0"' in html
    assert 'name="env.payload.title" value="Migrate the users table"' in html
    assert '<select name="env.payload.complexity"' in html  # an enum is a menu
    assert '<select name="env.priority"' in html and "<option selected>high</option>" in html
    assert 'name="env.payload.acceptanceCriteria"' in html and "no downtime</textarea>" in html
    assert 'name="env.kind"' not in html and 'name="env.hop"' not in html
    assert escalation.pk


def edit_form(**changes: str) -> dict[str, str]:
    form = {
        "edit": "1",
        "part-0": "please migrate",
        "env.priority": "high",
        "env.payload.title": "Migrate the users table",
        "env.payload.complexity": "medium",
        "env.payload.taskType": "implementation",
        "env.payload.acceptanceCriteria": "no downtime",
    }
    return {**form, **changes}


def test_an_edited_envelope_is_what_the_agent_gets_and_the_audit_keeps_the_diff(as_role):
    escalation = held_envelope()
    html = post(
        as_role("operator"),
        f"/escalations/{escalation.pk}/approve/",
        edit_form(**{"env.payload.title": "Migrate users, in batches", "part-0": "go slowly"}),
    ).content.decode()
    assert "Approved as edited." in html
    message = Message.objects.get(pk=escalation.message_id)
    assert message.parts[0] == {"text": "go slowly"}
    assert message.parts[1]["data"]["payload"]["title"] == "Migrate users, in batches"
    assert message.envelope["payload"]["title"] == "Migrate users, in batches"
    assert message.summary == "Migrate users, in batches"
    assert message.delivery_state == "queued"
    event = AuditEvent.objects.get(action="escalation.edit_approve")
    assert [(d["path"], d["before"], d["after"]) for d in event.data["diff"]] == [
        ("parts[0].text", "please migrate", "go slowly"),
        ("parts[1].data.payload.title", "Migrate the users table", "Migrate users, in batches"),
    ]


def test_an_invalid_edit_is_refused_beside_its_field_and_nothing_is_sent(as_role):
    escalation = held_envelope()
    html = post(
        as_role("operator"),
        f"/escalations/{escalation.pk}/approve/",
        edit_form(**{"env.payload.title": "", "env.payload.complexity": "galactic"}),
    ).content.decode()
    assert "Nothing was changed: the edited envelope is not valid." in html
    assert '<p class="field-error" data-field="payload.title">' in html
    assert '<p class="field-error" data-field="payload.complexity">' in html
    # The form comes back open with what was typed.
    assert f'id="escalation-{escalation.pk}-edit" class="edit" open' in html
    message = Message.objects.get(pk=escalation.message_id)
    assert message.parts[1]["data"]["payload"]["title"] == "Migrate the users table"
    assert message.delivery_state == "held"
    assert Escalation.objects.get(pk=escalation.pk).status == "pending"


# --- answers: quick replies, a form from the agent's schema ----------------------------------

WINDOW = {
    "type": "object",
    "required": ["window", "retries"],
    "properties": {
        "window": {"type": "string", "enum": ["tonight", "monday"]},
        "retries": {"type": "integer", "minimum": 0, "maximum": 3},
        "notify": {"type": "boolean"},
    },
}


def test_a_question_offers_its_options_and_a_form_from_its_schema(as_role):
    escalation = question("which window?", schema=WINDOW)
    Escalation.objects.filter(pk=escalation.pk).update(options=["tonight", "monday"])
    html = as_role("operator").get("/escalations/").content.decode()
    assert '<button type="submit" name="quick" value="tonight" class="quick">' in html
    assert '<select name="data.window"' in html
    assert '<input type="number" step="any" name="data.retries"' in html
    assert '<input type="checkbox" name="data.notify"' in html


def test_the_schema_form_is_checked_with_each_problem_beside_its_field(as_role):
    escalation = question("which window?", schema=WINDOW)
    html = post(
        as_role("operator"),
        f"/escalations/{escalation.pk}/answer/",
        {"quick": "monday", "data_form": "1", "data.window": "monday", "data.retries": "9"},
    ).content.decode()
    assert '<p class="field-error" data-field="retries">at most 3</p>' in html
    assert Escalation.objects.get(pk=escalation.pk).status == "pending"

    post(
        as_role("operator"),
        f"/escalations/{escalation.pk}/answer/",
        {"quick": "monday", "data_form": "1", "data.window": "monday", "data.retries": "2"},
    )
    answered = Escalation.objects.get(pk=escalation.pk)
    assert (answered.answer, answered.answer_data) == (
        "monday",
        {"window": "monday", "retries": 2, "notify": False},
    )
