"""Builders for test data: valid A2A cards, registered agents, tasks."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from a2a_core.models import (
    PRIORITY_RANK,
    Agent,
    Escalation,
    EscalationKind,
    Message,
    Task,
    TaskState,
)
from a2a_core.services.agents import Registration, agent_register
from a2a_core.services.escalations import held_fingerprint

_counter = itertools.count(1)
_message_ids = itertools.count(1)
# When `record_message` records a message, unless told otherwise.
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


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


def record_message(
    sender: Agent | None,
    target: Agent | None,
    *,
    at: datetime = T0,
    summary: str = "hello",
    task: Task | None = None,
    **fields: Any,
) -> Message:
    """A message as the hub records it, created at `at`."""
    message = Message.objects.create(
        message_id=f"m-{next(_message_ids)}",
        role=fields.pop("role", "user"),
        kind=fields.pop("kind", "request"),
        sender=sender,
        target=target,
        summary=summary,
        parts=fields.pop("parts", [{"text": summary}]),
        decision=fields.pop("decision", "deliver"),
        decision_reason=fields.pop("decision_reason", "ok"),
        task=task,
        context_id=task.context_id if task else "",
        **fields,
    )
    Message.objects.filter(pk=message.pk).update(created_at=at)
    message.created_at = at
    return message


def held_escalation(
    text: str = "echo please",
    *,
    caller: str = "alpha",
    target: str = "echo",
    priority: str = "normal",
    reason: str = "matrix rule alpha -> echo needs approval",
    parent: Task | None = None,
) -> Escalation:
    """A message from `caller` to `target` the policy held for approval."""
    caller_agent = register(caller).agent if not _exists(caller) else _agent(caller)
    target_agent = register(target).agent if not _exists(target) else _agent(target)
    task = make_task(
        target=target_agent,
        caller=caller_agent,
        state=TaskState.AUTH_REQUIRED,
        skill="echo",
        parent=parent,
        root=(parent.root or parent) if parent else None,
        depth=parent.depth + 1 if parent else 0,
        path=[*(parent.path if parent else [caller]), target],
        deadline=timezone.now() + timedelta(minutes=5),
    )
    message = Message.objects.create(
        message_id=f"m-{task.pk}",
        role="user",
        kind="request",
        parts=[{"text": text}],
        summary=text[:200],
        sender=caller_agent,
        target=target_agent,
        task=task,
        decision="hold",
        decision_reason="approval_required",
        delivery_state="held",
    )
    return Escalation.objects.create(
        kind=EscalationKind.APPROVAL,
        priority=priority,
        priority_rank=PRIORITY_RANK[priority],
        task=task,
        message=message,
        agent=caller_agent,
        question=text[:200],
        reason=reason,
        deadline=timezone.now() + timedelta(hours=1),
        fingerprint=held_fingerprint(caller=caller_agent, message=message),
    )


def question_escalation(
    text: str = "ship it on a Friday?",
    *,
    agent: str = "duc",
    schema: dict[str, Any] | None = None,
    priority: str = "normal",
) -> Escalation:
    """An inbox agent's question to the humans, its task in input-required."""
    asker = register(agent, inbox=True).agent if not _exists(agent) else _agent(agent)
    caller = register("caller").agent if not _exists("caller") else _agent("caller")
    task = make_task(
        target=asker,
        caller=caller,
        state=TaskState.INPUT_REQUIRED,
        path=["caller", agent],
        deadline=timezone.now() + timedelta(minutes=10),
    )
    return Escalation.objects.create(
        kind=EscalationKind.INPUT_REQUIRED,
        priority=priority,
        priority_rank=PRIORITY_RANK[priority],
        task=task,
        agent=asker,
        question=text,
        answer_schema=schema,
    )


def _exists(slug: str) -> bool:
    return Agent.objects.filter(slug=slug).exists()


def _agent(slug: str) -> Agent:
    return Agent.objects.get(slug=slug)
