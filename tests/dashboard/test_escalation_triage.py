"""Working the escalation inbox as a team: who decided (by name, everywhere), filters and
search kept in the URL, identical held messages folded, claims, and decisions in bulk."""

from __future__ import annotations

import re

import pytest

from a2a_core.models import Message
from tests.dashboard.test_escalations import post
from tests.factories import held_escalation as held
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
