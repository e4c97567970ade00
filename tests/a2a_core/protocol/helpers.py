"""Small builders for protocol tests."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from a2a_core.asyncdb import db
from a2a_core.models import Message as MessageRow
from a2a_core.models import Task as TaskRow

BINDINGS = ["JSONRPC", "HTTP+JSON"]
_ids = itertools.count(1)


def request(
    text: str,
    *,
    task_id: str = "",
    context_id: str = "",
    metadata: dict[str, Any] | None = None,
    return_immediately: bool = False,
    message_id: str | None = None,
    parts: list[Part] | None = None,
) -> SendMessageRequest:
    message = Message(
        message_id=message_id or f"msg-{next(_ids)}",
        role=Role.ROLE_USER,
        parts=parts if parts is not None else [Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    if metadata:
        message.metadata.update(metadata)
    built = SendMessageRequest(message=message)
    built.configuration.return_immediately = return_immediately
    return built


async def send(client: Any, req: SendMessageRequest) -> Any:
    """The single answer of a non-streaming client (a Task or a Message)."""
    async for event in client.send_message(req):
        return event.task if event.HasField("task") else event.message
    raise AssertionError("no answer")


async def collect(stream: Any) -> list[dict[str, Any]]:
    return [MessageToDict(event) async for event in stream]


async def eventually(check: Callable[[], Any], within: float = 10.0) -> Any:
    """Poll an async `check` until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def stored_task(task_id: str) -> TaskRow:
    return await db(
        lambda: TaskRow.objects.select_related("caller", "target", "parent", "root").get(pk=task_id)
    )


async def stored_messages(task_id: str) -> list[MessageRow]:
    return await db(
        lambda: list(MessageRow.objects.filter(task_id=task_id).order_by("created_at", "pk"))
    )


async def counts() -> tuple[int, int]:
    return await db(lambda: (TaskRow.objects.count(), MessageRow.objects.count()))
