"""An a2a-sdk 0.3 client setting push notification configs through the hub.

    sdk03_push_config.py HUB_URL AGENT TOKEN TASK_ID URL...

For each URL, calls `tasks/pushNotificationConfig/set` (the 0.3 JSON-RPC method) on the task
and prints one JSON line: {"url", "ok": true} or {"url", "code", "message", "data"}.
"""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import PushNotificationConfig, TaskPushNotificationConfig


async def main(hub: str, agent: str, token: str, task_id: str, *urls: str) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        config = ClientConfig(httpx_client=http, supported_transports=["JSONRPC"])
        client = await ClientFactory.connect(f"{hub}/a2a/{agent}", client_config=config)
        for url in urls:
            request = TaskPushNotificationConfig(
                task_id=task_id, push_notification_config=PushNotificationConfig(url=url)
            )
            try:
                await client.set_task_callback(request)
            except A2AClientJSONRPCError as exc:
                error = exc.error
                line = {"code": error.code, "message": error.message, "data": error.data}
            else:
                line = {"ok": True}
            print(json.dumps({"url": url, **line}), flush=True)
        await client.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
