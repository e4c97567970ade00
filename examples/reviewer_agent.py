"""An inbox agent: it has no server of its own, it connects to the hub and takes work.

Register it once (the token is printed once):

    .venv/bin/python manage.py a2a register examples/reviewer-card.json --inbox

then run it:

    HUB_URL=http://127.0.0.1:8000 HUB_TOKEN=a2ah_... .venv/bin/python examples/reviewer_agent.py

It answers `review_request`s with a verdict (a `review_response` artifact), `request`s with a
`response`, asks a human when a review touches a migration, and acknowledges broadcasts.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2a_core.client.hub import HubClient
from a2a_core.client.inbox import Delivery
from a2a_core.schemas.envelopes import ENVELOPE_MEDIA_TYPE


async def review(hub: HubClient, delivery: Delivery) -> None:
    payload = (delivery.envelope or {}).get("payload", {})
    files = payload.get("files", [])
    await delivery.working(f"reviewing {len(files)} files")
    if any("migration" in name for name in files) and delivery.attempt == 1:
        await delivery.ask_human(f"{payload.get('title')!r} changes a migration: approve it?")
        return
    concerns = [
        {"file": name, "severity": "should_fix", "description": "add a test for this file"}
        for name in files
        if not name.startswith("tests/")
    ]
    verdict = hub.envelope(
        "review_response",
        {
            "verdict": "changes_requested" if concerns else "approved",
            "summary": f"{len(concerns)} concerns in {len(files)} files",
            "concerns": concerns,
        },
    )
    await delivery.artifact(
        parts=[{"data": verdict, "mediaType": ENVELOPE_MEDIA_TYPE}], name="review"
    )
    await delivery.complete(verdict["payload"]["summary"])


async def handle(hub: HubClient, delivery: Delivery) -> None:
    print(f"<- {delivery.kind} from {delivery.sender}: {delivery.text[:80]}", flush=True)
    if delivery.kind == "review_request":
        await review(hub, delivery)
    elif delivery.kind == "request" and (delivery.envelope or {}).get("correlationId"):
        asked = (delivery.envelope or {}).get("payload", {}).get("text")
        await delivery.respond(text=f"the reviewer got: {asked}")
    elif delivery.kind == "request" and delivery.task_id:  # plain text
        await delivery.complete(f"the reviewer got: {delivery.text[:200]}")
    elif delivery.kind == "response" and delivery.task_id:  # a human answered our question
        await delivery.complete(f"a human said: {delivery.text}")
    elif delivery.task_id:
        await delivery.complete("this reviewer only takes review requests")
    # broadcasts and knowledge shares are acknowledged when this returns


async def main() -> None:
    url = os.environ.get("HUB_URL", "http://127.0.0.1:8000")
    token = os.environ["HUB_TOKEN"]
    agent = os.environ.get("HUB_AGENT", "reviewer")
    async with HubClient(url, token, agent=agent) as hub:
        print(f"{agent} is listening at {url}", flush=True)
        async for delivery in hub.inbox():
            await handle(hub, delivery)


if __name__ == "__main__":
    asyncio.run(main())
