"""The inbox at volume: the dense list, paging to the last item, the count of matches,
"select all N matching", a page per escalation, and claims that hold."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest

from a2a_core.models import Escalation, EscalationStatus, Message
from a2a_core.selectors.inbox_filter import CARDS_UP_TO, LIST_PAGE
from a2a_core.services.escalations import escalation_approve
from tests.dashboard.test_escalations import post
from tests.factories import held_escalation as held
from tests.factories import question_escalation as question

pytestmark = pytest.mark.django_db


def lines(html: str) -> list[int]:
    """The ids of the pending lines of the dense list, in order."""
    start = html.index('id="escalation-list"')
    end = html.find("Recently decided", start)
    return [int(pk) for pk in re.findall(r'<tr id="escalation-(\d+)"', html[start:end])]


def next_link(html: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', html)
    return found.group(1).replace("&amp;", "&") if found else None


@pytest.fixture
def many() -> list[Escalation]:
    """More held messages than a page of cards: the inbox shows the dense list."""
    return [held(f"deploy service-{i}", caller=f"c{i % 3}") for i in range(CARDS_UP_TO + 31)]


def test_past_a_page_of_cards_the_inbox_is_a_dense_list_with_its_total(as_role, many):
    html = as_role("viewer").get("/escalations/").content.decode()
    assert 'id="escalation-list" class="dense"' in html
    assert re.search(r'id="pending-total">131<', html)
    shown = lines(html)
    assert len(shown) == LIST_PAGE
    # Most urgent then newest first: all are normal, so the newest first.
    assert shown == sorted((e.pk for e in many), reverse=True)[:LIST_PAGE]
    assert "<article" not in html.split("Recently decided")[0]
    # Cards on request, with a pager too.
    cards = as_role("viewer").get("/escalations/?view=cards").content.decode()
    assert len(re.findall(r'<article id="escalation-', cards)) == 50
    assert next_link(cards, "next") is not None


def test_the_pager_reaches_the_last_item_forwards_backwards_and_at_once(as_role, many):
    viewer = as_role("viewer")
    newest_first = sorted((e.pk for e in many), reverse=True)
    html = viewer.get("/escalations/").content.decode()
    seen = lines(html)
    assert next_link(html, "prev") is None
    following = next_link(html, "next")
    assert following is not None
    second = viewer.get(f"/escalations/{following}").content.decode()
    seen += lines(second)
    assert seen == newest_first  # every item once, in order, the oldest last
    assert next_link(second, "next") is None
    back = viewer.get(f"/escalations/{next_link(second, 'prev')}").content.decode()
    assert lines(back) == newest_first[:LIST_PAGE]
    last = viewer.get(f"/escalations/{next_link(html, 'last')}").content.decode()
    assert lines(last) == newest_first[-LIST_PAGE:]
    assert lines(last)[-1] == many[0].pk


def test_paging_follows_each_sort_even_when_items_are_decided_between_pages(as_role, many):
    from django.utils import timezone

    # Deadlines: a third none (they come last), a third the same moment, the rest apart.
    now = timezone.now()
    for i, e in enumerate(many):
        deadline = None if i % 3 == 0 else now if i % 3 == 1 else now + timedelta(seconds=i)
        Escalation.objects.filter(pk=e.pk).update(deadline=deadline, priority_rank=i % 4)
    viewer = as_role("viewer")
    for sort in ("deadline", "oldest", "newest", "priority"):
        html = viewer.get(f"/escalations/?sort={sort}").content.decode()
        first = lines(html)
        # The page's last item is decided meanwhile: the next page still starts after it.
        Escalation.objects.filter(pk=first[-1]).update(status=EscalationStatus.APPROVED)
        rest = lines(viewer.get(f"/escalations/{next_link(html, 'next')}").content.decode())
        assert sorted(first + rest) == sorted(e.pk for e in many), sort
        # And backwards from the last page, the same order.
        Escalation.objects.filter(pk=first[-1]).update(status=EscalationStatus.PENDING)
        last = lines(viewer.get(f"/escalations/?sort={sort}&last=1").content.decode())
        assert last == (first + rest)[-LIST_PAGE:], sort


def test_select_all_matching_decides_every_match_in_batches_and_not_what_came_after(as_role, many):
    operator = as_role("operator")
    html = operator.get("/escalations/?agent=c1").content.decode()
    matching = [e.pk for e in many if e.agent.slug == "c1"]
    assert f"Select all {len(matching)} matching this view" in html
    upto = re.search(r'name="upto" value="(\d+)"', html).group(1)
    late = held("arrived after the page was read", caller="c1")
    answer = post(
        operator,
        "/escalations/bulk/",
        {"scope": "matching", "match": "agent=c1", "upto": upto, "action": "approve"},
    ).content.decode()
    assert f"Approved {len(matching)} of {len(matching)}." in answer
    statuses = dict(Escalation.objects.values_list("pk", "status"))
    assert all(statuses[pk] == "approved" for pk in matching)
    assert statuses[late.pk] == "pending"
    others = [e.pk for e in many if e.agent.slug != "c1"]
    assert all(statuses[pk] == "pending" for pk in others)
    queued = Message.objects.filter(escalations__pk__in=matching, delivery_state="queued")
    assert queued.count() == len(matching)  # each agent's message is on its way


def test_a_bulk_result_names_every_item_it_skipped_and_why(as_role, settings):
    settings.HUB_ESCALATION_CLAIMS = "hold"
    items = [held(f"m{i}") for i in range(8)]
    operator, other = as_role("operator"), as_role("admin")
    post(other, f"/escalations/{items[0].pk}/claim/")
    for e in items[1:7]:
        escalation_approve(escalation_id=e.pk, actor_label="erin")
    answer = post(
        operator,
        "/escalations/bulk/",
        {"ids": [str(e.pk) for e in items], "action": "reject", "reason": "no"},
    ).content.decode()
    assert "Rejected 1 of 8. Not decided: 7." in answer
    assert f"#{items[0].pk}: escalation {items[0].pk} is claimed by admin" in answer
    for e in items[1:7]:
        assert f"#{e.pk}: escalation {e.pk} was already approved by erin" in answer


def test_under_hold_a_claimed_item_is_decided_by_its_claimer_or_after_a_take_over(
    as_role, settings
):
    settings.HUB_ESCALATION_CLAIMS = "hold"
    claimed = held("mine")
    dana, erin = as_role("operator"), as_role("admin")
    post(dana, f"/escalations/{claimed.pk}/claim/")
    page = erin.get(f"/escalations/{claimed.pk}/").content.decode()
    assert "only they decide it" in page and "act-approve" not in page

    refused = post(erin, f"/escalations/{claimed.pk}/approve/").content.decode()
    assert "is claimed by operator: only they decide it, unless you take it over" in refused
    refused = post(erin, f"/escalations/{claimed.pk}/release/").content.decode()
    assert "is claimed by operator" in refused
    assert Escalation.objects.get(pk=claimed.pk).status == "pending"

    post(erin, f"/escalations/{claimed.pk}/claim/", {"take_over": "1"})
    post(erin, f"/escalations/{claimed.pk}/approve/")
    decided = Escalation.objects.get(pk=claimed.pk)
    assert (decided.status, decided.decided_by_name) == ("approved", "admin")


def test_claims_are_advisory_by_default(as_role):
    claimed = held("anyone")
    post(as_role("operator"), f"/escalations/{claimed.pk}/claim/")
    post(as_role("admin"), f"/escalations/{claimed.pk}/approve/")
    assert Escalation.objects.get(pk=claimed.pk).decided_by_name == "admin"


def test_an_escalation_has_a_page_with_payload_history_claimer_decider_and_the_edit(as_role):
    e = held("deploy to eu\nthen restart")
    operator = as_role("operator")
    post(operator, f"/escalations/{e.pk}/claim/")
    post(operator, f"/escalations/{e.pk}/approve/", {"text": "deploy to us\nthen restart"})
    page = operator.get(f"/escalations/{e.pk}/").content.decode()
    assert f"Escalation #{e.pk}" in page
    assert "&quot;text&quot;: &quot;deploy to us\\nthen restart&quot;" in page  # the payload
    assert "operator claimed escalation" in page and "approved held message" in page
    assert re.search(r'id="escalation-decider">operator', page)
    assert '<pre class="said original">deploy to eu\nthen restart</pre>' in page
    assert '<pre class="said edited">deploy to us\nthen restart</pre>' in page
    assert '<span class="del">- deploy to eu</span>' in page
    assert '<span class="ins">+ deploy to us</span>' in page
    assert '<span class="same">  then restart</span>' in page


def test_a_question_has_a_page_too_and_an_unknown_one_is_not_found(as_role):
    asked = question("which region?")
    viewer = as_role("viewer")
    page = viewer.get(f"/escalations/{asked.pk}/").content.decode()
    assert "which region?" in page and "Decided by" in page
    assert viewer.get("/escalations/999999/").status_code == 404


def test_the_dense_list_reads_a_fixed_number_of_queries_whatever_the_page(
    as_role, many, django_assert_max_num_queries
):
    from a2a_core.selectors.escalations import escalation_inbox
    from a2a_core.selectors.inbox_filter import Cursor

    with django_assert_max_num_queries(12):
        inbox = escalation_inbox(cursor=Cursor(after=many[-40].pk))
    assert inbox.dense and inbox.has_before


# --- the audit shows what was changed -------------------------------------------------------


def edited_and_approved(as_role: Any) -> Escalation:
    e = held("deploy to eu")
    post(as_role("operator"), f"/escalations/{e.pk}/approve/", {"text": "deploy to us"})
    return Escalation.objects.select_related("message").get(pk=e.pk)


def test_the_message_and_task_pages_show_the_original_beside_the_edit(as_role):
    e = edited_and_approved(as_role)
    viewer = as_role("viewer")
    for url in (f"/messages/{e.message_id}/", f"/tasks/{e.task_id}/"):
        html = viewer.get(url).content.decode()
        assert "Edited before approval" in html, url
        assert '<pre class="said original">deploy to eu</pre>' in html, url
        assert '<pre class="said edited">deploy to us</pre>' in html, url
        assert f'href="/escalations/{e.pk}/"' in html, url
    untouched = held("leave me")
    post(as_role("operator"), f"/escalations/{untouched.pk}/approve/")
    html = viewer.get(f"/messages/{untouched.message_id}/").content.decode()
    assert "Edited before approval" not in html


def test_the_jsonl_export_carries_the_original_and_the_edit(as_role):
    e = edited_and_approved(as_role)
    response = as_role("viewer").get("/audit/export.jsonl")
    log = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    [line] = [entry for entry in log if entry["messageId"] == e.message.message_id]
    assert line["edit"] == {
        "escalationId": e.pk,
        "editedBy": "operator",
        "originalText": "deploy to eu",
        "editedText": "deploy to us",
        "changes": [{"path": "parts[0].text", "before": "deploy to eu", "after": "deploy to us"}],
    }
    assert all("edit" not in entry for entry in log if entry is not line)


def test_the_audit_counts_its_matches(as_role):
    from a2a_core.selectors import audit

    for i in range(7):
        held(f"m{i}", caller="alpha" if i % 2 else "beta")
    viewer = as_role("viewer")
    html = viewer.get("/audit/").content.decode()
    assert re.search(r'id="audit-count">7 messages match; 7 on this page<', html)
    html = viewer.get("/audit/?sender=alpha").content.decode()
    assert re.search(r'id="audit-count">3 messages match; 3 on this page<', html)
    # Past its cap, the count says "more than".
    assert audit.audit_total(filters=audit.AuditFilter(), cap=5) == (5, True)


def test_a_decision_on_the_escalations_page_answers_with_its_card_without_a_box(as_role):
    e = held("claim me")
    operator = as_role("operator")
    operator.get("/escalations/")
    answer = operator.post(
        f"/escalations/{e.pk}/claim/",
        HTTP_X_CSRFTOKEN=operator.cookies["csrftoken"].value,
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver/escalations/{e.pk}/",
    ).content.decode()
    assert "It is yours" in answer and 'class="pick"' not in answer
    from_list = post(operator, f"/escalations/{e.pk}/release/").content.decode()
    assert 'class="pick"' in from_list
