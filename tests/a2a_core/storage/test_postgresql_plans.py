"""PostgreSQL: recording an agent's answers reads the answered tasks and messages by their keys,
not the whole table, however few rows PostgreSQL believes the table holds.

The batch's rows travel as one JSON document, and PostgreSQL guesses that a JSON array holds
100 elements; on a table it thinks small (never analysed, or grown since), joining 100 rows by
the key looked dearer than reading every row, so each answered batch read the whole table."""

from __future__ import annotations

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from a2a_core.asyncdb import db
from a2a_core.models import Task, TaskState
from tests.conftest import Worker

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans"),
]

EARLIER_TASKS = 3000
CALLS = 12


def earlier_tasks(caller_pk: int, target_pk: int) -> None:
    """Finished tasks from before, as many as a few minutes of traffic leave."""
    now = timezone.now()
    Task.objects.bulk_create(
        Task(
            id=f"earlier-{i:05}",
            target_id=target_pk,
            addressed_to_id=target_pk,
            caller_id=caller_pk,
            state=TaskState.COMPLETED,
            context_id=f"earlier-{i}",
            status_timestamp=now,
            trace_id="0" * 32,
        )
        for i in range(EARLIER_TASKS)
    )


def task_rows_read_whole() -> int:
    """Rows of the tasks table read by sequential scans, all sessions, up to now."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'a2a_core_task'"
        )
        return int(cursor.fetchone()[0])


async def test_answers_are_recorded_by_key_on_a_table_postgresql_thinks_small(hub):
    _, echo, _ = await hub.endpoint_agent("echo")
    alpha, token = await hub.caller("alpha")
    await db(earlier_tasks, alpha.pk, echo.pk)
    # A worker of its own, so that its connection's statistics reach PostgreSQL when it
    # stops; no vacuum, so that nothing tells PostgreSQL the table's size meanwhile.
    worker = Worker(HUB_PG_VACUUM_SECONDS="0").wait()
    try:
        before = await db(task_rows_read_whole)
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}, timeout=30
        ) as http:
            for n in range(CALLS):
                response = await http.post(
                    f"{worker.url}/a2a/echo/",
                    json={
                        "jsonrpc": "2.0",
                        "id": n,
                        "method": "SendMessage",
                        "params": {
                            "message": {
                                "messageId": f"plan-{n}",
                                "role": "ROLE_USER",
                                "parts": [{"text": f"call {n}"}],
                            }
                        },
                    },
                )
                state = response.json()["result"]["task"]["status"]["state"]
                assert state == "TASK_STATE_COMPLETED"
    finally:
        worker.stop()
    read = await db(task_rows_read_whole) - before
    # Each answer's batch reading the whole table would be 12 x 3,000 rows. Room is left for
    # a background pass of either process that reads the table whole once or twice.
    assert read < 3 * EARLIER_TASKS, f"{read} task rows read by sequential scans in {CALLS} calls"
    recorded = await db(
        lambda: (
            Task.objects.filter(state=TaskState.COMPLETED)
            .exclude(id__startswith="earlier-")
            .count()
        )
    )
    assert recorded == CALLS
