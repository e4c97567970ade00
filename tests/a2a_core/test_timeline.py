"""HUB_TIMELINE: a hub that notes where each call's time goes (bench/throughput.py --timeline)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory

from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.conftest import Worker

pytestmark = pytest.mark.live


async def test_a_hub_with_hub_timeline_writes_each_calls_way_through_it(hub, tmp_path: Path):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    path = tmp_path / "timeline.txt"
    worker = Worker(HUB_TIMELINE=str(path)).wait()
    try:
        async with httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=30
        ) as http:
            client = await ClientFactory(
                ClientConfig(httpx_client=http, streaming=False)
            ).create_from_url(f"{worker.url}/a2a/echo")
            await send(client, request("echo where does the time go"))

            async def written() -> str:
                return path.read_text().strip() if path.exists() else ""

            line = await eventually(written)
    finally:
        worker.stop()

    marks = [(name, int(at)) for name, at in (mark.split(":") for mark in line.split())]
    assert [name for name, _ in marks] == [
        "receive",
        "handler",
        "batch",
        "taken",
        "decide",
        "written",
        "commit",
        "forward",
        "answered",
        "batch",
        "taken",
        "written",
        "record",
        "answer",
    ]
    offsets = [at for _, at in marks]
    assert offsets[0] == 0 and offsets == sorted(offsets)
