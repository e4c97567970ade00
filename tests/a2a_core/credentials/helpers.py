"""Calling agents behind their own auth directly and through the hub, and what came back."""

from __future__ import annotations

from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import TaskState

from a2a_core.asyncdb import db
from a2a_core.services.credentials import agent_credentials_set
from tests.a2a_core.protocol.helpers import request
from tests.agents import ScriptedAgent


async def outcome(client: Any, text: str) -> tuple[str, list[str]]:
    """The task's last state and its artifacts' texts, blocking or streamed."""
    state = TaskState.TASK_STATE_UNSPECIFIED
    texts: list[str] = []
    async for event in client.send_message(request(text)):
        if event.HasField("task"):
            state = event.task.status.state
            texts = [p.text for a in event.task.artifacts for p in a.parts if p.text]
        elif event.HasField("status_update"):
            state = event.status_update.status.state
        elif event.HasField("artifact_update"):
            texts += [p.text for p in event.artifact_update.artifact.parts if p.text]
    return TaskState.Name(state), texts


async def direct_client(
    scripted: ScriptedAgent, *, binding: str, streaming: bool, opened: list[Any], **http: Any
) -> Any:
    """The official SDK client straight to the agent, with its credential in `http`
    (headers, params or cookies of the httpx client)."""
    client = httpx.AsyncClient(timeout=30, **http)
    opened.append(client)
    factory = ClientFactory(
        ClientConfig(
            streaming=streaming, httpx_client=client, supported_protocol_bindings=[binding]
        )
    )
    return factory.create(scripted.card)


async def set_credential(agent: Any, **kwargs: Any) -> Any:
    return await db(agent_credentials_set, agent=agent, actor_label="test", **kwargs)
