"""PostgreSQL: the dead rows that finished calls leave in the tables every call updates are
vacuumed by the hub within seconds, so the counts and reads of every group commit stop
walking through them; the calls-in-flight count reads only tasks in flight."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from a2a_core.models import ACTIVE_STATE_LIST, Task, TaskState
from a2a_core.storage.postgresql.vacuum import Vacuumer
from a2a_core.storage.reads import count_by
from tests.conftest import Worker
from tests.factories import register

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's vacuum"),
]


@pytest.fixture(autouse=True)
def _autovacuum_waits() -> Iterator[None]:
    """PostgreSQL's autovacuum of the tasks waits while these tests run: on a test database
    that was just emptied, 50 dead rows are enough for it to clear them before the hub does,
    and the tests count the hub's vacuums."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE a2a_core_task SET (autovacuum_enabled = false)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE a2a_core_task RESET (autovacuum_enabled)")


def calls_finished(n: int, *, still_in_flight: int = 0) -> int:
    """`n` tasks of one caller that were in flight and have finished, and `still_in_flight`
    more that have not, as the hub writes them (inserted working, updated when answered);
    the caller's pk."""
    caller, target = register("caller").agent, register("echo").agent
    now = timezone.now()
    Task.objects.bulk_create(
        Task(
            id=f"t-{i:05}",
            target=target,
            addressed_to=target,
            caller=caller,
            state=TaskState.WORKING,
            context_id=f"c-{i}",
            status_timestamp=now,
            trace_id="0" * 32,
        )
        for i in range(n + still_in_flight)
    )
    Task.objects.filter(id__lt=f"t-{n:05}").update(state=TaskState.COMPLETED)
    return caller.pk


def in_flight_count_plan(caller: int) -> dict[str, Any]:
    """What the in-flight count of a group commit reads, from PostgreSQL's own account."""
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT caller_id, COUNT(*) FROM a2a_core_task "
            "WHERE caller_id = ANY(%s) AND state IN ('submitted', 'working') GROUP BY caller_id",
            [[caller]],
        )
        plan = cursor.fetchone()[0][0]["Plan"]
    while "Plans" in plan:
        plan = plan["Plans"][0]
    return plan


def vacuums_of_tasks() -> int:
    with connection.cursor() as cursor:
        # Statistics a moment old: ask for this session's own to be sent now.
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'a2a_core_task'"
        )
        return cursor.fetchone()[0]


def wait_for_vacuum(before: int, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while vacuums_of_tasks() == before:
        if time.monotonic() > deadline:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT n_dead_tup, autovacuum_count FROM pg_stat_user_tables "
                    "WHERE relname = 'a2a_core_task'"
                )
                dead, autovacuums = cursor.fetchone()
            pytest.fail(
                f"the tasks were not vacuumed ({dead} dead rows, {autovacuums} autovacuums)"
            )
        time.sleep(0.1)


def test_the_in_flight_count_reads_the_tasks_in_flight_once_finished_ones_are_vacuumed():
    assert ACTIVE_STATE_LIST == ["submitted", "working"]  # as the statement above says
    vacuumer = Vacuumer(every=0.05, minimum=100)
    assert vacuumer.due() == []  # what it sees before the calls
    caller = calls_finished(300, still_in_flight=3)
    plan = in_flight_count_plan(caller)
    assert plan["Index Name"] == "task_inflight"
    # Each finished task's earlier version, dead but still indexed, is looked up.
    assert plan["Heap Fetches"] >= 300

    before = vacuums_of_tasks()
    vacuumer.start()
    try:
        wait_for_vacuum(before)
    finally:
        vacuumer.stop()

    plan = in_flight_count_plan(caller)
    assert plan["Heap Fetches"] == 0
    assert count_by(Task, "caller_id", {caller}, ACTIVE_STATE_LIST) == {caller: 3}


def test_a_table_with_few_dead_rows_is_left_alone():
    vacuumer = Vacuumer(every=0.05, minimum=100)
    vacuumer.due()
    calls_finished(20)
    before = vacuums_of_tasks()
    vacuumer.start()
    try:
        time.sleep(1.5)
    finally:
        vacuumer.stop()
    assert vacuums_of_tasks() == before


def running_worker(vacuum_seconds: str) -> Worker:
    """A hub worker process that has had a first look at the tables."""
    worker = Worker(HUB_PG_VACUUM_SECONDS=vacuum_seconds).wait()
    time.sleep(1)
    return worker


def test_a_hub_worker_vacuums_the_tasks_its_calls_left_dead():
    worker = running_worker("0.2")
    try:
        before = vacuums_of_tasks()
        calls_finished(1200)
        wait_for_vacuum(before)
    finally:
        worker.stop()


def test_a_hub_worker_told_not_to_vacuum_leaves_it_to_autovacuum():
    worker = running_worker("0")
    try:
        before = vacuums_of_tasks()
        calls_finished(1200)
        time.sleep(2)
    finally:
        worker.stop()
    assert vacuums_of_tasks() == before
