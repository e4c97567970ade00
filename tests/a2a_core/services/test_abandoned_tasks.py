"""Tasks a dead server process was delivering are handed over to be asked about, not stuck."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from a2a_core.models import TaskFollow, TaskState
from a2a_core.services.follow import tasks_abandoned_follow
from tests.factories import make_task, register

pytestmark = pytest.mark.django_db


def test_an_endpoint_task_left_working_past_its_deadline_is_handed_over_once(settings):
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

    assert tasks_abandoned_follow(now=now) == 1
    assert tasks_abandoned_follow(now=now) == 0
    assert list(TaskFollow.objects.values_list("task_id", flat=True)) == [stuck.pk]
    stuck.refresh_from_db()
    assert stuck.state == TaskState.WORKING  # until the agent has been asked
