"""Reads for the tasks screens: the board by state, one task with its history and delegation
chain, and the conversation of a context. Each reads a fixed number of queries however many
tasks, events or messages there are; long lists are capped (newest kept) and say so."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from a2a_core.errors import NotFound
from a2a_core.models import (
    Agent,
    Artifact,
    Direction,
    Escalation,
    Message,
    Task,
    TaskEvent,
    TaskEventKind,
    TaskState,
)
from a2a_core.schemas.a2a import parts_summary
from a2a_core.schemas.envelope_form import envelope_fields, kind_schema
from a2a_core.selectors.deciders import message_deciders
from a2a_core.selectors.traces import context_tasks

OPEN_STATES = [
    TaskState.SUBMITTED,
    TaskState.WORKING,
    TaskState.INPUT_REQUIRED,
    TaskState.AUTH_REQUIRED,
]
ENDED_STATES = [TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED]

EVENT_LIMIT = 500
MESSAGE_LIMIT = 500
CHAIN_LIMIT = 200


# --- the board -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BoardFilter:
    """Tasks an agent (slug) calls or serves; `text` in a message summary, the skill, the
    reason it ended, or the task's or context's id."""

    agent: str = ""
    text: str = ""


@dataclass(frozen=True)
class BoardColumn:
    state: str
    label: str
    # Newest first; each task carries `first_summary`, the summary of its first request.
    tasks: list[Task]
    # More tasks are in this state than the column shows.
    more: bool


@dataclass(frozen=True)
class Board:
    open: list[BoardColumn]
    ended: list[BoardColumn]
    ended_limit: int


def _first_summary() -> Subquery:
    return Subquery(
        Message.objects.filter(task=OuterRef("pk"), direction=Direction.REQUEST)
        .order_by("created_at", "pk")
        .values("summary")[:1]
    )


def task_board(*, filters: BoardFilter, open_limit: int = 100, ended_limit: int = 12) -> Board:
    """Tasks by state, newest first: every open state (up to `open_limit` each), then the
    most recent `ended_limit` of each ended state.

    One query per column, each a range of the (state, -status_timestamp) index, plus one to
    find the agent when filtering by agent; an unknown agent gives an empty board.
    """
    tasks: QuerySet[Task] = Task.objects.select_related("caller", "target").annotate(
        first_summary=_first_summary()
    )
    if filters.agent:
        agent_id = Agent.objects.filter(slug=filters.agent).values_list("pk", flat=True).first()
        if agent_id is None:
            return Board(
                open=[BoardColumn(s, TaskState(s).label, [], False) for s in OPEN_STATES],
                ended=[BoardColumn(s, TaskState(s).label, [], False) for s in ENDED_STATES],
                ended_limit=ended_limit,
            )
        tasks = tasks.filter(Q(caller_id=agent_id) | Q(target_id=agent_id))
    if filters.text:
        text = filters.text
        said = Message.objects.filter(task=OuterRef("pk"), summary__icontains=text)
        tasks = tasks.filter(
            Q(pk=text)
            | Q(context_id=text)
            | Q(skill__icontains=text)
            | Q(reason__icontains=text)
            | Exists(said)
        )

    def column(state: str, limit: int) -> BoardColumn:
        found = list(tasks.filter(state=state).order_by("-status_timestamp", "-pk")[: limit + 1])
        return BoardColumn(state, TaskState(state).label, found[:limit], len(found) > limit)

    return Board(
        open=[column(s, open_limit) for s in OPEN_STATES],
        ended=[column(s, ended_limit) for s in ENDED_STATES],
        ended_limit=ended_limit,
    )


# --- parts, as a human reads them ------------------------------------------------------------


@dataclass(frozen=True)
class PartView:
    """One A2A part for display: `kind` is text, data (pretty JSON in `text`) or file
    (`label` names it, `text` says where it is or how big). A typed envelope (a data part
    whose `kind` the hub knows) also has its fields, (label, value) in its schema's order,
    blank ones left out: `label` is then its kind."""

    kind: str
    text: str
    label: str = ""
    fields: tuple[tuple[str, str], ...] = ()

    @property
    def gist(self) -> str:
        """An envelope in a line: its payload's first two values (else its first two)."""
        payload = [value for label, value in self.fields if label.startswith("payload")]
        shown = payload or [value for _, value in self.fields]
        return " · ".join(" ".join(value.split())[:60] for value in shown[:2])


def part_views(parts: Any, *, join_text: bool = False) -> list[PartView]:
    """Parts as humans read them. With `join_text`, consecutive text parts become one (an
    artifact streamed in chunks reads as the text it is)."""
    views: list[PartView] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if "text" in part:
            text = str(part.get("text") or "")
            if join_text and views and views[-1].kind == "text":
                views[-1] = PartView("text", views[-1].text + text)
            else:
                views.append(PartView("text", text))
        elif "data" in part:
            pretty = json.dumps(
                _whole_numbers(part["data"]), indent=2, sort_keys=True, ensure_ascii=False
            )
            fields = _envelope_fields(part["data"])
            label = str(part["data"]["kind"]) if fields else str(part.get("mediaType") or "")
            views.append(PartView("data", pretty, label, fields))
        elif "url" in part or "raw" in part:
            name = str(part.get("filename") or part.get("url") or "file")
            where = str(part["url"]) if "url" in part else f"{len(str(part['raw'])) * 3 // 4} bytes"
            media = str(part.get("mediaType") or "")
            views.append(PartView("file", where + (f" ({media})" if media else ""), name))
    return views


def _envelope_fields(data: Any) -> tuple[tuple[str, str], ...]:
    """A typed envelope's filled fields as (label, value); () for any other data."""
    if not isinstance(data, dict) or kind_schema(str(data.get("kind", ""))) is None:
        return ()
    try:
        fields = envelope_fields(_whole_numbers(data))
    except (AttributeError, TypeError, KeyError, ValueError):
        return ()  # not the shape its kind says: the JSON is still there
    return tuple((f.label, "yes" if f.checked else f.value) for f in fields if f.value or f.checked)


def _whole_numbers(value: Any) -> Any:
    """JSON with 2 for 2.0: protobuf carries every number as a double, people wrote 2."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


@dataclass(frozen=True)
class MessageView:
    message: Message
    parts: list[PartView]
    # Who made its decision: a person, or "policy v3 by alice" (`selectors.deciders`).
    decided_by: str = ""


def _views(messages: list[Message]) -> list[MessageView]:
    """The messages as shown, each with who made its decision (one query for the human
    ones)."""
    who = message_deciders(messages)
    return [MessageView(m, part_views(m.parts), who.get(m.pk, "")) for m in messages]


def _message_rows() -> QuerySet[Message]:
    return Message.objects.select_related("sender", "target", "author", "redirected_to")


# --- one task --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimelineEntry:
    """One line of a task's status timeline: a state it reached, or an artifact it got."""

    at: datetime
    kind: str  # created | status | artifact | message
    state: str
    label: str
    detail: str = ""


@dataclass(frozen=True)
class ArtifactView:
    artifact: Artifact
    parts: list[PartView]


@dataclass(frozen=True)
class TaskDetail:
    task: Task
    timeline: list[TimelineEntry]
    # Older events not in the timeline (a long-running task's log is capped).
    earlier_events: int
    messages: list[MessageView]
    earlier_messages: bool
    artifacts: list[ArtifactView]
    escalations: list[Escalation]
    # The whole delegation chain the task belongs to: its root first, by depth.
    chain: list[Task]
    chain_more: bool


def _timeline_entry(event: TaskEvent) -> TimelineEntry:
    payload = event.payload if isinstance(event.payload, dict) else {}
    if event.kind == TaskEventKind.STATUS:
        status = (payload.get("statusUpdate") or {}).get("status") or {}
        message = status.get("message") or {}
        text = parts_summary(message.get("parts") or []) if isinstance(message, dict) else ""
        return TimelineEntry(event.created_at, "status", event.state, text)
    if event.kind == TaskEventKind.ARTIFACT:
        update = payload.get("artifactUpdate") or {}
        artifact = update.get("artifact") or {}
        name = str(artifact.get("name") or artifact.get("artifactId") or "artifact")
        if update.get("lastChunk") and update.get("append"):
            detail = "last chunk"
        elif update.get("append"):
            detail = "chunk"
        else:
            detail = ""
        return TimelineEntry(event.created_at, "artifact", "", name, detail)
    message = payload.get("message") or {}
    text = parts_summary(message.get("parts") or []) if isinstance(message, dict) else ""
    return TimelineEntry(event.created_at, "message", "", text)


def task_detail(*, task_id: str) -> TaskDetail:
    """A task with its status timeline, messages, artifacts, escalations and delegation
    chain, in six queries. Raises `NotFound`."""
    task = (
        Task.objects.select_related("caller", "target", "addressed_to", "parent")
        .filter(pk=task_id)
        .first()
    )
    if task is None:
        raise NotFound(f"task {task_id} not found")

    first_seq = max(0, task.event_seq - EVENT_LIMIT)
    events = TaskEvent.objects.filter(task=task, seq__gt=first_seq).order_by("seq")
    timeline = [TimelineEntry(task.created_at, "created", TaskState.SUBMITTED, "")]
    timeline.extend(_timeline_entry(event) for event in events)

    newest = list(
        _message_rows().filter(task=task).order_by("-created_at", "-pk")[: MESSAGE_LIMIT + 1]
    )
    messages = _views(list(reversed(newest[:MESSAGE_LIMIT])))

    artifacts = [
        ArtifactView(a, part_views(a.parts, join_text=True))
        for a in Artifact.objects.filter(task=task).order_by("created_at", "pk")
    ]
    escalations = list(
        Escalation.objects.filter(task=task)
        .select_related("agent", "decided_by")
        .order_by("created_at", "pk")
    )

    root_id = task.root_id or task.pk
    chain = list(
        Task.objects.filter(Q(pk=root_id) | Q(root_id=root_id))
        .select_related("caller", "target")
        .defer("status_message", "metadata")
        .order_by("depth", "created_at", "pk")[: CHAIN_LIMIT + 1]
    )
    return TaskDetail(
        task=task,
        timeline=timeline,
        earlier_events=first_seq,
        messages=messages,
        earlier_messages=len(newest) > MESSAGE_LIMIT,
        artifacts=artifacts,
        escalations=escalations,
        chain=chain[:CHAIN_LIMIT],
        chain_more=len(chain) > CHAIN_LIMIT,
    )


# --- a conversation --------------------------------------------------------------------------


@dataclass(frozen=True)
class Conversation:
    context_id: str
    # Every task of the context, oldest first.
    tasks: list[Task]
    # Its messages in time order (the newest MESSAGE_LIMIT).
    messages: list[MessageView]
    earlier_messages: bool


def conversation(*, context_id: str) -> Conversation:
    """Every message of every task sharing `context_id`, and of the tasks delegated from them
    (a delegated call has a context of its own), in time order, in four queries. Raises
    `NotFound` for a context no task or message has."""
    tasks = context_tasks(context_id=context_id)[:CHAIN_LIMIT]
    newest = list(
        _message_rows()
        .select_related("task")
        .filter(Q(context_id=context_id) | Q(task_id__in=[t.pk for t in tasks]))
        .order_by("-created_at", "-pk")[: MESSAGE_LIMIT + 1]
    )
    if not tasks and not newest:
        raise NotFound(f"no task or message has context {context_id}")
    return Conversation(
        context_id=context_id,
        tasks=tasks,
        messages=_views(list(reversed(newest[:MESSAGE_LIMIT]))),
        earlier_messages=len(newest) > MESSAGE_LIMIT,
    )


def task_recent(*, agent_id: int | None = None, state: str = "", limit: int = 50) -> list[Task]:
    """The most recently updated tasks (of one agent, in one state), newest first."""
    tasks = Task.objects.select_related("caller", "target").annotate(first_summary=_first_summary())
    if agent_id is not None:
        tasks = tasks.filter(Q(caller_id=agent_id) | Q(target_id=agent_id))
    if state:
        tasks = tasks.filter(state=state)
    return list(tasks.order_by("-status_timestamp", "-pk")[:limit])
