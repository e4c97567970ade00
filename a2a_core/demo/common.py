"""What the demo's two processes share: their configuration, the log line, the hub client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from a2a.types.a2a_pb2 import Message, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict

from a2a_core.client.hub import HubClient
from a2a_core.schemas.a2a import HUB_METADATA

# The environment variable naming the process's configuration file (JSON, readable only by
# its user, deleted once read: it holds the agents' tokens).
CONFIG_ENV = "A2A_DEMO_CONFIG"

STATE_NAMES = {
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_SUBMITTED: "submitted",
}


def load_config() -> dict[str, Any]:
    """The configuration `launch` wrote for this process; the file is removed once read."""
    path = Path(os.environ[CONFIG_ENV])
    try:
        config: dict[str, Any] = json.loads(path.read_text())
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
    return config


_stopping = False


def say(scene: str, text: str) -> None:
    """One line per scenario step, on stdout (none once the process is stopping: what breaks
    while everything shuts down is no scenario step)."""
    if not _stopping:
        print(f"{time.strftime('%H:%M:%S')}  {scene:<10} {text}", flush=True)


def refusal(exc: BaseException) -> str | None:
    """The policy's reason when `exc` is the hub refusing a call (`loop_detected`...)."""
    data = exc.data if isinstance(exc, A2AError) else None
    reason = (data or {}).get("reason")
    return str(reason) if reason else None


def retry_after(exc: BaseException, default: float) -> float:
    data = exc.data if isinstance(exc, A2AError) else None
    try:
        return float((data or {}).get("retryAfterSeconds", default))
    except (TypeError, ValueError):
        return default


def short(text: str, limit: int = 100) -> str:
    """The first line of `text` without the URL clause of HTTP errors, at most `limit` long."""
    text = re.sub(r" for url '[^']*'", "", text.strip().split("\n", 1)[0])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(exc: BaseException) -> str:
    """A short account of a failed call, for the log line."""
    reason = refusal(exc)
    if reason:
        return f"refused by the hub ({reason})"
    return short(str(exc) or type(exc).__name__)


def state_of(result: Task | Message) -> str:
    if isinstance(result, Message):
        return "answered"
    return STATE_NAMES.get(result.status.state, "unknown")


def status_text(result: Task | Message) -> str:
    """What the task's current status says (why it failed...)."""
    parts = result.parts if isinstance(result, Message) else result.status.message.parts
    return short(" ".join(p.text for p in parts if p.text))


def artifact_texts(result: Task | Message) -> list[str]:
    if isinstance(result, Message):
        return [p.text for p in result.parts if p.text]
    return [p.text for a in result.artifacts for p in a.parts if p.text]


def artifact_envelopes(result: Task | Message, kind: str) -> list[dict[str, Any]]:
    """The envelopes of `kind` among a task's artifacts (or a message's parts)."""
    parts = (
        list(result.parts)
        if isinstance(result, Message)
        else [p for a in result.artifacts for p in a.parts]
    )
    found = []
    for part in parts:
        if part.HasField("data"):
            data = MessageToDict(part).get("data")
            if isinstance(data, dict) and data.get("kind") == kind:
                found.append(data)
    return found


def hub_task_id(message: Message | None) -> str:
    """The hub's id of the task a forwarded message belongs to (`metadata.a2aHub.taskId`)."""
    if message is None:
        return ""
    fields = MessageToDict(message.metadata).get(HUB_METADATA) or {}
    return str(fields.get("taskId") or "")


class CastClient(HubClient):
    """`HubClient` plus delegation: a call made while working on a hub task becomes its child."""

    async def call(
        self,
        to: str,
        text: str | None = None,
        *,
        envelope: dict[str, Any] | None = None,
        parent: str = "",
        wait: bool = True,
        timeout_seconds: float | None = None,
    ) -> Task | Message:
        message = self.message(text, envelope=envelope, timeout_seconds=timeout_seconds)
        if parent:
            fields = MessageToDict(message.metadata).get(HUB_METADATA) or {}
            message.metadata.update({HUB_METADATA: {**fields, "parentTaskId": parent}})
        request = SendMessageRequest(message=message)
        request.configuration.return_immediately = not wait
        async for event in (await self._client(to)).send_message(request):
            return event.task if event.HasField("task") else event.message
        raise ConnectionError(f"the hub answered nothing for the message to {to}")


async def sleep_unless_stopped(stop: asyncio.Event, seconds: float) -> None:
    """Sleep `seconds`, or less if `stop` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


def run(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run `main(stop)` until it returns; SIGINT or SIGTERM sets `stop`. Exits 0 on a signal."""

    async def runner() -> None:
        stop = asyncio.Event()

        def stopping() -> None:
            global _stopping
            _stopping = True
            # Calls cut short by the shutdown make the SDK and uvicorn complain: expected now.
            logging.disable(logging.CRITICAL)
            stop.set()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping)
        await main(stop)

    try:
        asyncio.run(runner())
    except KeyboardInterrupt:  # a Ctrl-C before the handlers were in place
        sys.exit(0)
