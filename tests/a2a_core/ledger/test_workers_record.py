"""Several hub worker processes on one database (scaled mode on PostgreSQL + Redis) seal one
log: every entry gets one place, and `a2a audit verify` finds it intact."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from a2a_core.asyncdb import db
from a2a_core.models import LedgerEntry
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.protocol.helpers import eventually
from tests.conftest import Worker

pytestmark = pytest.mark.live


async def _route(url: str, token: str, text: str) -> None:
    async with httpx.AsyncClient(
        headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}, timeout=30
    ) as http:
        response = await http.post(
            f"{url}/a2a/echo/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": text.replace(" ", "-"),
                        "role": "ROLE_USER",
                        "parts": [{"text": f"echo {text}"}],
                    }
                },
            },
        )
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_two_worker_processes_seal_one_log_that_verifies(hub):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    fast = {"HUB_LEDGER_SEAL_SECONDS": "0.05", "HUB_LEDGER_CHECKPOINT_SECONDS": "0.2"}
    workers = [Worker(**fast), Worker(**fast)]
    try:
        first, second = (worker.wait(60) for worker in workers)
        await asyncio.gather(
            *(
                _route(worker.url, alpha, f"call {n} via {i}")
                for n in range(10)
                for i, worker in enumerate((first, second))
            )
        )

        async def all_sealed() -> bool:
            return not await db(LedgerEntry.objects.filter(leaf_index__isnull=True).exists)

        await eventually(all_sealed)
    finally:
        for worker in workers:
            worker.stop()
    indexes = await db(
        lambda: list(
            LedgerEntry.objects.order_by("leaf_index").values_list("leaf_index", flat=True)
        )
    )
    assert indexes == list(range(len(indexes)))
    decisions = await db(LedgerEntry.objects.filter(kind="decision").count)
    assert decisions == 20
    out = await db(a2a, "audit", "verify", "--quiet")
    assert out.startswith(f"intact: {len(indexes)} entries")
