"""Builders for test data: valid A2A cards, registered agents, tasks."""

from __future__ import annotations

import itertools
from typing import Any

from django.utils import timezone

from a2a_core.models import Agent, Task, TaskState
from a2a_core.services.agents import Registration, agent_register

_counter = itertools.count(1)


def make_card(
    name: str | None = None,
    *,
    url: str = "http://127.0.0.1:9/",
    binding: str = "JSONRPC",
    version: str = "1.0.0",
    skills: list[dict[str, Any]] | None = None,
    streaming: bool = True,
    interfaces: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    name = name or f"agent-{next(_counter)}"
    return {
        "name": name,
        "description": f"{name} does things",
        "version": version,
        "supportedInterfaces": interfaces
        if interfaces is not None
        else [{"url": url, "protocolBinding": binding, "protocolVersion": "1.0"}],
        "capabilities": {"streaming": streaming},
        "defaultInputModes": ["text"],
        "defaultOutputModes": ["text"],
        "skills": skills
        if skills is not None
        else [{"id": "echo", "name": "Echo", "description": "echoes", "tags": ["test"]}],
    }


def make_inbox_card(name: str | None = None, **kwargs: Any) -> dict[str, Any]:
    card = make_card(name, **kwargs)
    card.pop("supportedInterfaces")
    return card


def register(name: str | None = None, *, inbox: bool = False, **kwargs: Any) -> Registration:
    card_kwargs = {
        k: kwargs.pop(k)
        for k in list(kwargs)
        if k in {"url", "binding", "version", "skills", "streaming"}
    }
    card = make_inbox_card(name, **card_kwargs) if inbox else make_card(name, **card_kwargs)
    return agent_register(card=card, delivery_mode="inbox" if inbox else "endpoint", **kwargs)


def make_task(
    *, target: Agent, caller: Agent | None = None, state: str = TaskState.SUBMITTED, **kwargs: Any
) -> Task:
    return Task.objects.create(
        target=target,
        addressed_to=target,
        caller=caller,
        state=state,
        context_id=kwargs.pop("context_id", "ctx-1"),
        status_timestamp=timezone.now(),
        trace_id=kwargs.pop("trace_id", "0" * 32),
        **kwargs,
    )
