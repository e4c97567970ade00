"""One message to a demo endpoint agent (`Turn`), and what every agent's behaviour uses."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.helpers import (
    get_message_text,
    new_data_part,
    new_task_from_user_message,
    new_text_message,
    new_text_part,
)
from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Role
from google.protobuf.json_format import MessageToDict

from a2a_core.demo.common import CastClient, hub_task_id
from a2a_core.schemas.envelopes import ENVELOPE_EXTENSION, ENVELOPE_MEDIA_TYPE


class Turn:
    """One message to an agent and what the agent does with it: start a task, add artifacts,
    complete it — or answer at once with a message."""

    def __init__(
        self, agent: str, context: RequestContext, queue: EventQueue, hub: CastClient
    ) -> None:
        assert context.message is not None
        self.agent, self.context, self.queue, self.hub = agent, context, queue, hub
        self.message: Message = context.message
        self.text = get_message_text(self.message)
        self.envelope: dict[str, Any] = next(
            (
                data
                for part in MessageToDict(self.message).get("parts") or []
                if isinstance(data := part.get("data"), dict) and "kind" in data
            ),
            {},
        )
        self.kind = str(self.envelope.get("kind") or "request")
        self.payload: dict[str, Any] = self.envelope.get("payload") or {}
        # The hub's id of this task: calls made for it carry it as their parent.
        self.task_id = hub_task_id(self.message)
        self.updater: TaskUpdater | None = None

    async def start(self, note: str) -> TaskUpdater:
        task = self.context.current_task
        if task is None:
            task = new_task_from_user_message(self.message)
            await self.queue.enqueue_event(task)
        self.updater = TaskUpdater(self.queue, task.id, task.context_id)
        await self.updater.start_work(self.updater.new_agent_message([new_text_part(note)]))
        return self.updater

    async def artifact(
        self, name: str, *, text: str | None = None, envelope: dict[str, Any] | None = None
    ) -> None:
        assert self.updater is not None
        parts: list[Part] = [new_text_part(text)] if text else []
        if envelope is not None:
            parts.append(new_data_part(envelope, media_type=ENVELOPE_MEDIA_TYPE))
        await self.updater.add_artifact(parts, name=name)

    async def complete(self, text: str) -> None:
        assert self.updater is not None
        await self.updater.complete(self.updater.new_agent_message([new_text_part(text)]))

    async def fail(self, text: str) -> None:
        assert self.updater is not None
        await self.updater.failed(self.updater.new_agent_message([new_text_part(text)]))

    async def reply(self, text: str, *, envelope: dict[str, Any] | None = None) -> None:
        """Answer with a message (no task)."""
        message = new_text_message(text, role=Role.ROLE_AGENT)
        if envelope is not None:
            message.parts.append(new_data_part(envelope, media_type=ENVELOPE_MEDIA_TYPE))
            message.extensions.append(ENVELOPE_EXTENSION)
        await self.queue.enqueue_event(message)


Behaviour = Callable[[Turn], Awaitable[None]]


async def pause(low: float, high: float) -> None:
    """An agent at work: a moment of thinking."""
    await asyncio.sleep(random.uniform(low, high))


def task_request(hub: CastClient, title: str, payload: dict[str, Any], **fields: Any) -> Any:
    return hub.envelope("task_request", {"title": title, **payload}, **fields)
