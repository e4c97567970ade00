"""PostgreSQL drops a worker's connections (a restart of the server, a failover, an operator's
`pg_terminate_backend`): the calls that come next are answered and stored, none fails on a
connection the server has already closed."""

from __future__ import annotations

import os
import signal
import time

import httpx
import psycopg
import pytest
from django.db import connection

from a2a_core.asyncdb import db
from a2a_core.models import Message
from tests.conftest import Worker, database_url

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="PostgreSQL's connections: covered by the suite's second run",
    ),
]

# libpq names the worker's connections after this, so the test drops only its own.
APP_NAME = "hub-cut-off"


def cut_off(worker: Worker) -> int:
    """Terminate the worker's idle connections; how many there were.

    The worker is stopped meanwhile (SIGSTOP), so that none of its threads starts a query
    between PostgreSQL's list of idle connections and their end: a background pass's query
    under way (its vacuums come round every 0.2 s) would fail with its connection whatever
    the hub did. What the test is after is a connection closed while nobody used it."""
    os.kill(worker.process.pid, signal.SIGSTOP)
    try:
        time.sleep(0.1)  # what was already on its way to PostgreSQL has arrived
        with psycopg.connect(database_url(), autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE application_name = %s AND state = 'idle'",
                (APP_NAME,),
            ).fetchall()
    finally:
        os.kill(worker.process.pid, signal.SIGCONT)
    return len(rows)


async def rpc(http: httpx.AsyncClient, url: str, method: str, params: dict) -> dict:
    response = await http.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    )
    return response.json()


async def send(http: httpx.AsyncClient, url: str, message_id: str) -> dict:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": message_id}]}
    return await rpc(http, url, "SendMessage", {"message": message})


async def test_calls_after_postgresql_dropped_the_workers_connections_are_answered(hub, tmp_path):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    log = tmp_path / "worker.log"
    # The vacuums (on a connection of their own) come round every few tenths of a second.
    worker = Worker(log, PGAPPNAME=APP_NAME, HUB_PG_VACUUM_SECONDS="0.2").wait()
    url = f"{worker.url}/a2a/echo/"
    try:
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}, timeout=30
        ) as http:
            # The worker's pooled connections and its writers' are open.
            earlier = [await send(http, url, f"before-{i}") for i in range(5)]
            task_ids = [answer["result"]["task"]["id"] for answer in earlier]

            assert cut_off(worker) >= 2

            # Reads first (a task looked up on a pooled connection), then calls (written by
            # the writers, then read).
            looked_up = [await rpc(http, url, "GetTask", {"id": task}) for task in task_ids]
            answers = [await send(http, url, f"after-{i}") for i in range(10)]
    finally:
        worker.stop()

    assert [answer.get("error") for answer in looked_up + answers] == [None] * 15
    # Nor did the worker's own work in the background (its passes over the outbox, pushes
    # and follow-ups, its vacuums) meet a closed connection.
    assert "OperationalError" not in log.read_text()
    assert [answer["result"]["id"] for answer in looked_up] == task_ids
    assert [a["result"]["task"]["status"]["state"] for a in answers] == [
        "TASK_STATE_COMPLETED"
    ] * 10
    stored = await db(
        lambda: set(
            Message.objects.filter(message_id__startswith="after-").values_list(
                "message_id", flat=True
            )
        )
    )
    assert stored == {f"after-{i}" for i in range(10)}
