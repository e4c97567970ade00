"""An a2a-sdk 0.3 client calling an agent through the hub.

    sdk03_client.py HUB_URL AGENT TOKEN TRANSPORT TEXT [stream]

Fetches the agent's card from HUB_URL/a2a/AGENT (no URL forced), builds its client from that
card for TRANSPORT (JSONRPC or HTTP+JSON), sends TEXT (streaming with `stream`), and prints
one JSON line per event:
{"transport", "url", "kind", "state", "text"}; a failure prints {"error": ...} and exits 1.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.transports import JsonRpcTransport, RestTransport
from a2a.types import Message, Part, Role, TextPart


def texts(parts: list[Part]) -> list[str]:
    return [p.root.text for p in parts if isinstance(p.root, TextPart)]


async def main(hub: str, agent: str, token: str, transport: str, text: str, mode: str = "") -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        config = ClientConfig(
            streaming=mode == "stream", httpx_client=http, supported_transports=[transport]
        )
        client = await ClientFactory.connect(f"{hub}/a2a/{agent}", client_config=config)
        used = client._transport  # which transport the factory chose from the card
        kind = {JsonRpcTransport: "JSONRPC", RestTransport: "HTTP+JSON"}.get(type(used), "?")
        message = Message(
            role=Role.user, parts=[Part(root=TextPart(text=text))], message_id=uuid.uuid4().hex
        )
        async for event in client.send_message(message):
            if isinstance(event, Message):
                line = {"kind": "message", "text": texts(event.parts)}
            else:
                task, _ = event
                line = {
                    "kind": "task",
                    "state": task.status.state.value,
                    "text": [t for a in task.artifacts or [] for t in texts(a.parts)],
                }
            print(json.dumps({"transport": kind, "url": used.url, **line}), flush=True)
        await client.close()


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:7]))
    except Exception as exc:  # the test reads what went wrong
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        sys.exit(1)
