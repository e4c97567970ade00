"""The A2A task state machine: legal moves are recorded, illegal ones refused with nothing written."""

from __future__ import annotations

import pytest

from a2a_core.errors import IllegalTransition
from a2a_core.models import TERMINAL_STATES, TaskEvent, TaskState
from a2a_core.services.task_states import task_transition
from tests.factories import make_task, register

pytestmark = pytest.mark.django_db


@pytest.fixture
def task():
    return make_task(target=register("worker").agent)


def test_a_task_moves_through_its_life_and_every_step_is_logged(task):
    for state in ["working", "input-required", "working", "completed"]:
        task_transition(task_id=task.pk, state=state)
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    events = list(TaskEvent.objects.filter(task=task).values_list("seq", "state"))
    assert events == [(1, "working"), (2, "input-required"), (3, "working"), (4, "completed")]
    assert task.event_seq == 4


@pytest.mark.parametrize("terminal", sorted(TERMINAL_STATES))
@pytest.mark.parametrize("new", ["working", "completed", "submitted", "canceled"])
def test_nothing_leaves_a_terminal_state(task, terminal, new):
    task_transition(task_id=task.pk, state=terminal)
    with pytest.raises(IllegalTransition, match=f"is {terminal}, a terminal state"):
        task_transition(task_id=task.pk, state=new)
    task.refresh_from_db()
    assert task.state == terminal
    assert task.event_seq == 1


def test_nothing_returns_to_submitted(task):
    task_transition(task_id=task.pk, state="working")
    with pytest.raises(IllegalTransition, match="cannot go from working to submitted"):
        task_transition(task_id=task.pk, state="submitted")


def test_interrupted_states_resume_through_working(task):
    task_transition(task_id=task.pk, state="input-required")
    with pytest.raises(IllegalTransition, match="allowed from input-required"):
        task_transition(task_id=task.pk, state="auth-required")


def test_unknown_state_is_refused(task):
    with pytest.raises(IllegalTransition, match="not a task state"):
        task_transition(task_id=task.pk, state="sleeping")


def test_terminal_reason_and_status_message_are_kept(task):
    message = {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "no disk"}]}
    task_transition(task_id=task.pk, state="failed", status_message=message, reason="no disk left")
    task.refresh_from_db()
    assert (task.reason, task.status_message) == ("no disk left", message)
    payload = TaskEvent.objects.get(task=task).payload
    assert payload["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED"


def test_an_answer_weeks_after_its_request_is_recorded_with_the_longest_latency_stored():
    from datetime import timedelta

    from django.utils import timezone

    from a2a_core.models import Message
    from a2a_core.services.task_recording import MAX_LATENCY_MS
    from a2a_core.services.tasks import Reply, tasks_record
    from tests.factories import record_message

    caller, target = register("patient-caller").agent, register("slow-worker").agent
    task = make_task(target=target, caller=caller, state=TaskState.WORKING)
    asked = record_message(caller, target, task=task, at=timezone.now() - timedelta(days=40))

    [result] = tasks_record(
        [
            Reply(
                task.pk,
                {"messageId": "finally", "role": "ROLE_AGENT", "parts": [{"text": "done"}]},
                (asked.pk, asked.created_at),
            )
        ]
    )

    assert not isinstance(result, Exception)
    asked.refresh_from_db()
    assert asked.latency_ms == MAX_LATENCY_MS and asked.responded_at is not None
    assert Message.objects.filter(task=task, message_id="finally").exists()
