"""The sender's bookkeeping in the database: claims, progress, the retry schedule."""

from __future__ import annotations

from datetime import timedelta

import pytest

from a2a_core.models import PushNotificationConfig, TaskState
from a2a_core.services.push import (
    PushConfigInput,
    push_claim,
    push_config_save,
    push_delivered,
    push_failed,
    push_pending,
    push_release,
)
from a2a_core.services.task_states import task_transition
from tests.factories import make_task

LEASE = timedelta(seconds=60)


@pytest.fixture
def config(agent_pair):
    alpha, beta = agent_pair
    task = make_task(caller=alpha.agent, target=beta.agent)
    task_transition(task_id=task.pk, state=TaskState.WORKING)
    task_transition(task_id=task.pk, state=TaskState.COMPLETED)
    return push_config_save(
        owner=alpha.agent,
        target=None,
        config=PushConfigInput(
            task_id=task.pk, config_id="c", url="https://hooks.example.com/", token="k" * 16
        ),
    )


def test_a_claimed_config_is_not_claimed_again_until_released(config):
    [(pk, claim)] = push_claim(limit=10, lease=LEASE)

    assert pk == config.pk
    assert push_claim(limit=10, lease=LEASE) == []
    assert push_pending(pk=pk, claim="someone-else", limit=10) is None
    push_release(pk=pk, claim=claim)
    [(again, _)] = push_claim(limit=10, lease=LEASE)
    assert again == pk


def test_progress_is_kept_and_a_finished_task_is_set_aside(config):
    [(pk, claim)] = push_claim(limit=10, lease=LEASE)
    batch = push_pending(pk=pk, claim=claim, limit=10)
    assert batch is not None
    assert [seq for seq, _, _ in batch.events] == [1, 2]

    for seq, _, _ in batch.events:
        assert push_delivered(pk=pk, claim=claim, seq=seq, status=204, lease=LEASE)

    assert push_pending(pk=pk, claim=claim, limit=10) is None
    row = PushNotificationConfig.objects.get(pk=pk)
    assert (row.delivered_seq, row.claim, row.next_attempt_at) == (2, "", None)
    assert push_claim(limit=10, lease=LEASE) == []


def test_retries_back_off_exponentially_then_the_event_is_given_up(config):
    delays = []
    for attempt in range(1, 7):
        [(pk, claim)] = push_claim(limit=10, lease=LEASE)
        failed = push_failed(
            pk=pk,
            claim=claim,
            seq=1,
            status=500,
            error="HTTP 500",
            max_attempts=6,
            first_retry_seconds=1.0,
            lease=LEASE,
        )
        assert failed.attempts == attempt
        if failed.gave_up:
            break
        row = PushNotificationConfig.objects.get(pk=pk)
        assert failed.retry_at is not None
        delays.append(round((failed.retry_at - row.last_attempt_at).total_seconds()))
        # Due again at once, as if the wait were over.
        PushNotificationConfig.objects.filter(pk=pk).update(next_attempt_at=row.last_attempt_at)

    assert delays == [1, 2, 4, 8, 16]
    assert failed.gave_up
    row = PushNotificationConfig.objects.get(pk=config.pk)
    assert (row.delivered_seq, row.attempts, row.undelivered) == (1, 0, 1)
    assert row.last_error == "event 1, attempt 6: HTTP 500"


def test_an_idle_poll_costs_one_query(config, django_assert_num_queries):
    PushNotificationConfig.objects.update(next_attempt_at=None)

    with django_assert_num_queries(1):
        assert push_claim(limit=10, lease=LEASE) == []
