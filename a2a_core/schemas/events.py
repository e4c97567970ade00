"""The hub's events, as they travel on the Channels layer (see `a2a_core.events`).

One model per event, told apart by `event` (the Channels message's `type` is always
`hub.event`: it names the consumer method that receives it). Unknown fields are refused. The
layer carries plain dicts (`wire`); whoever receives one reads it back with `parse_event`.

Producers build events with their (validating) constructors: pydantic-core validates these
models in about half the time `model_construct` takes to skip it (a message and a task item:
5.6 against 10.5 µs), and a commit's events cost ~16 µs against ~4 µs as plain dicts (~25 µs
when every group is sent, with Redis) — about 2% of the hub's CPU per call. The channel layer
carries dicts only for groups someone listens to (`a2a_core.events`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from a2a_core.logging import get_logger

log = get_logger("events")

CHANNEL_TYPE: Literal["hub.event"] = "hub.event"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- the items of a `traffic` event ------------------------------------------------------------


class MessageRow(Strict):
    """What a message's row in the live feed shows besides the item's own fields."""

    created_at: str  # ISO 8601
    redirected_to_id: int | None
    author: str | None  # the human author's username
    recipients: int
    summary: str
    detail: str
    latency_ms: int | None
    decision_latency_us: int | None
    trace_id: str
    hop: int
    # The policy version that decided it (`Message.decision_policy_version`).
    policy_version: int | None = None


class MessageItem(Strict):
    """A message recorded, or a held one decided on (`decided`). `row` is None when the
    message's human author was not at hand: the relay then reads the message back."""

    type: Literal["message"] = "message"
    message_pk: int
    kind: str
    direction: str
    sender_id: int | None
    target_id: int | None
    decision: str
    reason: str
    task_id: str | None
    state: str
    row: MessageRow | None = None
    # A held message a human just decided on: its row, if drawn, shows the decision in place.
    decided: bool = False


class TaskRow(Strict):
    updated_at: str  # ISO 8601
    reason: str


class TaskItem(Strict):
    """A task created or changed (`change`: created, updated, status)."""

    type: Literal["task"] = "task"
    change: str
    task_id: str
    context_id: str
    state: str
    caller_id: int | None
    target_id: int | None
    root_id: str | None
    seq: int
    row: TaskRow | None = None


class AnsweredItem(Strict):
    """A request answered: its row in the feed shows the latency."""

    type: Literal["answered"] = "answered"
    message_pk: int
    latency_ms: int


TrafficItem = Annotated[MessageItem | TaskItem | AnsweredItem, Field(discriminator="type")]


# --- events ------------------------------------------------------------------------------------


class Event(Strict):
    type: Literal["hub.event"] = CHANNEL_TYPE


class Traffic(Event):
    """On `traffic`: every message and task change of one commit."""

    event: Literal["traffic"] = "traffic"
    items: list[TrafficItem]


class TaskChanged(Event):
    """On `task.<id>`: the task has events up to `seq`."""

    event: Literal["task.changed"] = "task.changed"
    task_id: str
    seq: int


AgentChange = Literal[
    "agent.registered",
    "agent.updated",
    "agent.status",
    "agent.token_rotated",
    "agent.deleted",
    # Its outbound credential was set or cleared, or the agent refused it, or took it again.
    "agent.credentials",
]


class AgentChanged(Event):
    """On `agents` and `agent.<id>`: the agent's registration, token or status changed."""

    event: AgentChange
    agent_id: int
    slug: str
    status: str


EscalationChange = Literal[
    "escalation.opened", "escalation.claimed", "escalation.decided", "escalation.withdrawn"
]


class EscalationChanged(Event):
    """On `escalations`."""

    event: EscalationChange
    escalation_id: int
    status: str
    task_id: str | None
    kind: str


class PolicyActivated(Event):
    """On `policy`: version `number` is the active policy now."""

    event: Literal["policy.activated"] = "policy.activated"
    number: int


class OutboxQueued(Event):
    """On `outbox`: a held message was approved and waits to be forwarded."""

    event: Literal["outbox.queued"] = "outbox.queued"
    message_pk: int


class FanOutQueued(Event):
    """On `outbox`: a broadcast waits to be sent to its recipients."""

    event: Literal["outbox.fan_out"] = "outbox.fan_out"
    message_pk: int


class NotifyQueued(Event):
    """On `outbox`: escalation notices wait to be sent."""

    event: Literal["notify.queued"] = "notify.queued"


class InboxWake(Event):
    """On `inbox.<agent id>`: deliveries are queued for the agent."""

    event: Literal["inbox.wake"] = "inbox.wake"


class InboxCanceled(Event):
    """On `inbox.<agent id>`: a task the agent works on was canceled."""

    event: Literal["inbox.canceled"] = "inbox.canceled"
    task_id: str


HubEvent = Annotated[
    Traffic
    | TaskChanged
    | AgentChanged
    | EscalationChanged
    | PolicyActivated
    | OutboxQueued
    | FanOutQueued
    | NotifyQueued
    | InboxWake
    | InboxCanceled,
    Field(discriminator="event"),
]

EVENT_ADAPTER: TypeAdapter[HubEvent] = TypeAdapter(HubEvent)


def wire(event: Event) -> dict[str, Any]:
    """The event as the channel layer carries it: plain values only."""
    return event.model_dump()


def parse_event(message: dict[str, Any]) -> HubEvent | None:
    """The event a channel-layer message carries; None (logged) when it is not one."""
    try:
        return EVENT_ADAPTER.validate_python(message)
    except ValidationError:
        log.warning("not a hub event", extra={"event": str(message.get("event", ""))[:64]})
        return None
