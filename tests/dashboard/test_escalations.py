"""The escalation inbox: who sees what, who may decide, and what each decision does."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from a2a_core.models import (
    AuditEvent,
    Escalation,
    EscalationStatus,
    Message,
    Task,
)
from a2a_core.services.users import user_create
from tests.dashboard.conftest import PASSWORD
from tests.factories import held_escalation as held
from tests.factories import question_escalation as question
from tests.factories import register

pytestmark = pytest.mark.django_db


def post(client: Client, url: str, data: dict[str, str] | None = None) -> Any:
    """A POST the way the page sends it: htmx, with the CSRF token of a page it loaded."""
    client.get("/escalations/")
    return client.post(
        url,
        data or {},
        HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value,
        HTTP_HX_REQUEST="true",
    )


def card_ids(html: str, section: str) -> list[int]:
    """The escalation ids shown in a section of the page, in order."""
    start = html.index(section)
    ends = [html.find(h, start + 1) for h in ("<h2>",)]
    end = min(e for e in ends if e > 0) if any(e > 0 for e in ends) else len(html)
    return [int(pk) for pk in re.findall(r'<article id="escalation-(\d+)"', html[start:end])]


def fresh(escalation: Escalation) -> Escalation:
    return Escalation.objects.select_related("decided_by").get(pk=escalation.pk)


# --- the page --------------------------------------------------------------------------------


def test_pending_escalations_come_most_urgent_then_newest_and_decided_ones_below(as_role):
    low = held("low", priority="low")
    normal_old = held("normal old")
    urgent = held("urgent", priority="urgent")
    normal_new = question("normal new")
    done = held("decided")
    Escalation.objects.filter(pk=done.pk).update(
        status=EscalationStatus.REJECTED, decided_at=timezone.now(), answer="no"
    )

    html = as_role("viewer").get("/escalations/").content.decode()

    assert card_ids(html, "Waiting for a human") == [
        urgent.pk,
        normal_new.pk,
        normal_old.pk,
        low.pk,
    ]
    assert card_ids(html, "Recently decided") == [done.pk]


def test_a_card_shows_who_asks_why_the_chain_and_a_countdown(as_role):
    root = held("plan the release", caller="orchestrator", target="alpha")
    escalation = held("echo please", caller="alpha", target="echo", parent=root.task)

    html = as_role("viewer").get("/escalations/").content.decode()
    card = html[html.index(f'id="escalation-{escalation.pk}"') :]
    card = card[: card.index("</article>")]

    assert "Held message" in card and "matrix rule alpha -&gt; echo needs approval" in card
    assert "echo please" in card
    slugs = re.findall(r'href="/agents/([^/]+)/"', card)
    assert slugs[:4] == ["alpha", "orchestrator", "alpha", "echo"]
    assert (
        f'href="/tasks/{root.task.pk}/"' in card and f'href="/tasks/{escalation.task.pk}/"' in card
    )
    assert re.search(r'data-deadline="\d{4}-\d\d-\d\dT[^"]+"', card)


def card_of(html: str, escalation: Escalation) -> str:
    card = html[html.index(f'id="escalation-{escalation.pk}"') :]
    return card[: card.index("</article>")]


def test_a_deadline_within_the_warning_window_is_warned_about_on_its_card_and_in_the_header(
    as_role, settings
):
    settings.HUB_NOTIFY_WARN_SECONDS = 600
    near, far = question("near?"), question("far?")
    Escalation.objects.filter(pk=near.pk).update(deadline=timezone.now() + timedelta(seconds=150))
    Escalation.objects.filter(pk=far.pk).update(deadline=timezone.now() + timedelta(hours=1))

    html = as_role("viewer").get("/escalations/").content.decode()
    near_card, far_card = card_of(html, near), card_of(html, far)
    assert re.search(r'class="[^"]* expiring"', near_card)
    assert '<strong class="expiry-warning" role="status">expiring soon</strong>' in near_card
    assert " expiring" not in far_card.split(">", 1)[0]
    assert '<strong class="expiry-warning" role="status" hidden></strong>' in far_card
    assert re.search(r'<span id="escalation-count"[^>]*>2</span>', html)
    assert re.search(r'<span id="escalation-expiring"[^>]*>1 expiring</span>', html)

    settings.HUB_NOTIFY_WARN_SECONDS = 60  # a narrower window: nothing is near yet
    html = as_role("viewer").get("/escalations/").content.decode()
    assert " expiring" not in card_of(html, near).split(">", 1)[0]
    assert re.search(r'<span id="escalation-expiring"[^>]* hidden></span>', html)


def test_viewers_watch_and_operators_get_the_buttons(as_role):
    held()
    question()
    viewer = as_role("viewer").get("/escalations/").content.decode()
    assert "deciding needs the operator role" in viewer
    assert "hx-post" not in viewer

    operator = as_role("operator").get("/escalations/").content.decode()
    for label in ("Approve", "Reject", "Redirect", "Edit, then approve", "Send answer"):
        assert label in operator


def test_an_htmx_refresh_gets_only_the_list(as_role):
    held()
    response = as_role("viewer").get("/escalations/", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.startswith('<div id="escalation-list">') and "topbar" not in html


def test_agent_text_with_markup_is_shown_as_text(as_role):
    held("<img src=x onerror=alert(1)>", reason="<b>held</b>")
    question("<script>alert('q')</script>")
    html = as_role("operator").get("/escalations/").content.decode()
    assert "<img src=x" not in html and "<script>alert" not in html and "<b>held" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;script&gt;alert(&#x27;q&#x27;)&lt;/script&gt;" in html
    assert "&lt;b&gt;held&lt;/b&gt;" in html


def test_the_inbox_reads_a_fixed_number_of_queries_however_many_wait(
    as_role, django_assert_max_num_queries
):
    from a2a_core.selectors.escalations import escalation_inbox

    for i in range(3):
        held(f"message {i}")
    question()
    # The count of matches and the newest id ("select all N matching") are one query each.
    with django_assert_max_num_queries(8) as few:
        escalation_inbox()
    for i in range(12):
        held(f"more {i}")
        question(f"q {i}")
    with django_assert_max_num_queries(len(few.captured_queries)):
        escalation_inbox()


# --- who may decide ---------------------------------------------------------------------------


ACTIONS = [
    ("approve", {}),
    ("approve", {"text": "edited"}),
    ("redirect", {"to": "beta"}),
    ("reject", {"reason": "no"}),
]


@pytest.mark.parametrize(("action", "data"), ACTIONS)
def test_viewers_and_anonymous_users_cannot_decide(as_role, client, action, data):
    escalation = held()
    register("beta")
    viewer = as_role("viewer")
    assert post(viewer, f"/escalations/{escalation.pk}/{action}/", data).status_code == 403
    anonymous = client.post(f"/escalations/{escalation.pk}/{action}/", data)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    assert fresh(escalation).status == "pending"


def test_viewers_cannot_answer(as_role):
    escalation = question()
    response = post(as_role("viewer"), f"/escalations/{escalation.pk}/answer/", {"text": "yes"})
    assert response.status_code == 403
    assert fresh(escalation).status == "pending"


def test_a_decision_without_the_csrf_token_is_refused(as_role):
    escalation = held()
    response = as_role("operator").post(f"/escalations/{escalation.pk}/approve/")
    assert response.status_code == 403
    assert fresh(escalation).status == "pending"


def test_a_decision_is_a_post(as_role):
    escalation = held()
    assert as_role("operator").get(f"/escalations/{escalation.pk}/approve/").status_code == 405


def test_an_unknown_escalation_is_not_found(as_role):
    assert post(as_role("operator"), "/escalations/999/approve/").status_code == 404


# --- decisions --------------------------------------------------------------------------------


def test_an_operator_approves_a_held_message_and_the_card_shows_it(as_role):
    escalation = held()
    response = post(as_role("operator"), f"/escalations/{escalation.pk}/approve/")
    html = response.content.decode()

    assert response.status_code == 200
    assert f'<article id="escalation-{escalation.pk}"' in html and 'hx-swap-oob="true"' in html
    assert "Approved: the message is on its way." in html
    assert "hx-post" not in html  # no buttons left on a decided card
    decided = fresh(escalation)
    assert (decided.status, decided.decided_by.username) == ("approved", "operator")
    assert Task.objects.get(pk=escalation.task_id).state == "working"
    assert Message.objects.get(pk=escalation.message_id).delivery_state == "queued"
    assert AuditEvent.objects.filter(
        action="escalation.approve", object_id=str(escalation.pk), actor__username="operator"
    ).exists()


def test_edit_then_approve_sends_the_edited_text(as_role):
    escalation = held("echo please")
    html = post(
        as_role("operator"), f"/escalations/{escalation.pk}/approve/", {"text": "echo politely"}
    ).content.decode()
    assert "Approved as edited." in html and "echo politely" in html
    assert Message.objects.get(pk=escalation.message_id).parts == [{"text": "echo politely"}]
    assert AuditEvent.objects.filter(action="escalation.edit_approve").exists()


def test_an_empty_edit_changes_nothing_and_says_why(as_role):
    escalation = held()
    html = post(
        as_role("operator"), f"/escalations/{escalation.pk}/approve/", {"text": "  "}
    ).content.decode()
    assert "Nothing was changed: the edited message is empty." in html
    assert '<p class="field-error">write the message to send</p>' in html
    assert fresh(escalation).status == "pending" and "hx-post" in html


def test_the_redirect_menu_offers_agents_with_the_skill_first(as_role):
    escalation = held()
    register("zeta")  # has the factory's `echo` skill
    register(
        "other", skills=[{"id": "write", "name": "Write", "description": "w", "tags": ["prose"]}]
    )
    html = as_role("operator").get("/escalations/").content.decode()
    menu = html[html.index(f'id="escalation-{escalation.pk}-to"') :]
    menu = menu[: menu.index("</select>")]
    assert re.findall(r'<optgroup label="([^"]+)"', menu) == ["with skill echo", "other agents"]
    assert re.findall(r'<option value="([^"]+)"', menu) == ["zeta", "other"]


def test_an_operator_redirects_a_held_message(as_role):
    escalation = held()
    register("beta")
    html = post(
        as_role("operator"), f"/escalations/{escalation.pk}/redirect/", {"to": "beta"}
    ).content.decode()
    assert "Redirected to beta." in html
    task = Task.objects.select_related("target").get(pk=escalation.task_id)
    assert (task.target.slug, task.path, fresh(escalation).status) == (
        "beta",
        ["alpha", "beta"],
        "redirected",
    )


@pytest.mark.parametrize(
    ("to", "error"),
    [("", "choose an agent"), ("nobody", "no agent &#x27;nobody&#x27; is registered")],
)
def test_a_redirect_to_no_agent_changes_nothing(as_role, to, error):
    escalation = held()
    html = post(
        as_role("operator"), f"/escalations/{escalation.pk}/redirect/", {"to": to}
    ).content.decode()
    assert f'<p class="field-error">{error}</p>' in html
    assert fresh(escalation).status == "pending"


def test_a_rejection_needs_a_reason(as_role):
    escalation = held()
    operator = as_role("operator")
    html = post(operator, f"/escalations/{escalation.pk}/reject/", {"reason": " "}).content.decode()
    assert "Nothing was changed: a reason is required." in html
    assert '<p class="field-error">say why; the calling agent sees it</p>' in html
    assert fresh(escalation).status == "pending"

    html = post(
        operator, f"/escalations/{escalation.pk}/reject/", {"reason": "not on a Friday"}
    ).content.decode()
    assert "Rejected: the caller sees your reason." in html and "not on a Friday" in html
    task = Task.objects.get(pk=escalation.task_id)
    assert (task.state, task.reason) == ("rejected", "not on a Friday")
    assert AuditEvent.objects.filter(action="escalation.reject").count() == 1


def test_the_second_decision_on_the_same_message_loses_and_says_who_won(as_role, users):
    escalation = held()
    first = as_role("operator")
    second = Client(enforce_csrf_checks=True)
    second.force_login(user_create(username="bob", password=PASSWORD, role="operator"))

    assert "Approved" in post(first, f"/escalations/{escalation.pk}/approve/").content.decode()
    response = post(second, f"/escalations/{escalation.pk}/reject/", {"reason": "too late?"})

    html = response.content.decode()
    assert response.status_code == 200
    assert "Already approved by operator; your rejection was not applied." in html
    assert "hx-post" not in html and 'data-status="approved"' in html
    assert fresh(escalation).status == "approved"
    assert Task.objects.get(pk=escalation.task_id).state == "working"
    assert not AuditEvent.objects.filter(action="escalation.reject").exists()


# --- answers ------------------------------------------------------------------------------------


def test_an_operator_answers_a_question_and_the_answer_goes_to_the_agent(as_role):
    escalation = question()
    html = post(
        as_role("operator"), f"/escalations/{escalation.pk}/answer/", {"text": "yes, ship it"}
    ).content.decode()
    assert "Answer sent: the agent gets it next." in html and "yes, ship it" in html
    decided = fresh(escalation)
    assert (decided.status, decided.answer, decided.decided_by.username) == (
        "answered",
        "yes, ship it",
        "operator",
    )
    answer = Message.objects.get(task_id=escalation.task_id, kind="response")
    assert (answer.parts, answer.recipients, answer.delivery_state) == (
        [{"text": "yes, ship it"}],
        ["duc"],
        "queued",
    )
    assert Task.objects.get(pk=escalation.task_id).state == "working"
    assert AuditEvent.objects.filter(action="escalation.answer").exists()


def test_an_empty_answer_changes_nothing(as_role):
    escalation = question()
    html = post(
        as_role("operator"), f"/escalations/{escalation.pk}/answer/", {"text": ""}
    ).content.decode()
    assert '<p class="field-error">write the answer</p>' in html
    assert fresh(escalation).status == "pending"


def test_a_withdrawn_question_cannot_be_answered(as_role):
    escalation = question()
    Escalation.objects.filter(pk=escalation.pk).update(
        status=EscalationStatus.WITHDRAWN, decided_at=timezone.now()
    )
    html = post(
        as_role("operator"), f"/escalations/{escalation.pk}/answer/", {"text": "yes"}
    ).content.decode()
    assert (
        "Already withdrawn (the agent&#x27;s task moved on); your answer was not applied." in html
    )
    assert not Message.objects.filter(kind="response").exists()


SCHEMA = {
    "type": "object",
    "required": ["go", "window"],
    "properties": {"go": {"type": "boolean"}, "window": {"type": "string", "minLength": 2}},
    "additionalProperties": False,
}


def test_a_question_with_a_schema_asks_for_json_too(as_role):
    question(schema=SCHEMA)
    html = as_role("operator").get("/escalations/").content.decode()
    assert 'name="data"' in html and "&quot;additionalProperties&quot;: false" in html


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ("", "duc asked for data fitting its schema"),
        ("{go: yes}", "not valid JSON"),
        ('{"go": "yes", "window": "x", "extra": 1}', "data.go: expected boolean"),
        ('{"go": true}', "data.window: required"),
        ('{"go": true, "window": "\\ud800"}', "remove the lone surrogate"),
    ],
)
def test_structured_data_that_does_not_fit_the_schema_changes_nothing(as_role, data, error):
    escalation = question(schema=SCHEMA)
    html = post(
        as_role("operator"),
        f"/escalations/{escalation.pk}/answer/",
        {"text": "see data", "data": data},
    ).content.decode()
    assert error in html and "Nothing was changed" in html
    assert fresh(escalation).status == "pending"


def test_structured_data_that_fits_reaches_the_agent_as_a_data_part(as_role):
    escalation = question(schema=SCHEMA)
    post(
        as_role("operator"),
        f"/escalations/{escalation.pk}/answer/",
        {"text": "go tonight", "data": '{"go": true, "window": "22:00"}'},
    )
    assert fresh(escalation).answer_data == {"go": True, "window": "22:00"}
    answer = Message.objects.get(task_id=escalation.task_id, kind="response")
    assert answer.parts == [
        {"text": "go tonight"},
        {"data": {"go": True, "window": "22:00"}, "mediaType": "application/json"},
    ]
