"""Tasks a dead server process was delivering end failed, with the reason, not stuck."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from a2a_core.models import TaskState
from a2a_core.services.tasks import tasks_abandoned_fail
from tests.factories import make_task, register

pytestmark = pytest.mark.django_db


def test_an_endpoint_task_left_working_past_its_deadline_fails_with_the_reason(settings):
    grace = settings.HUB_ABANDONED_GRACE_SECONDS
    target = register("echo").agent
    caller = register("alpha").agent
    now = timezone.now()
    stuck = make_task(target=target, caller=caller, state=TaskState.WORKING)
    stuck.deadline = now - timedelta(seconds=grace + 1)
    stuck.save()
    fresh = make_task(target=target, caller=caller, state=TaskState.WORKING)
    fresh.deadline = now - timedelta(seconds=1)  # only just past: its process may still answer
    fresh.save()
    inbox = make_task(
        target=register("duc", inbox=True).agent, caller=caller, state=TaskState.WORKING
    )
    inbox.deadline = now - timedelta(hours=1)  # inbox tasks have their own deadline rules
    inbox.save()

    assert tasks_abandoned_fail(now=now) == 1
    for task in (stuck, fresh, inbox):
        task.refresh_from_db()
    assert stuck.state == TaskState.FAILED
    assert "the hub lost this delivery" in stuck.reason
    assert (fresh.state, inbox.state) == (TaskState.WORKING, TaskState.WORKING)
