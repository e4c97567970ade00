"""Reads for replays: a task's answer in a form two answers compare in, a set with each
item's recorded and replayed answers side by side (with their text diff), and the set as
JSONL for evaluation tools."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from a2a_core.errors import NotFound
from a2a_core.models import Artifact, Direction, Message, ReplayItem, ReplaySet, Task
from a2a_core.schemas.a2a import parts_summary

# What an answer's text may hold, in characters.
MAX_TEXT = 20_000


def recorded_answer(task: Task) -> dict[str, Any]:
    """The answer a task got, as replays compare it: its state, its text (the agent's replies
    and final status message, then each artifact's text), its artifacts by name with their
    text, and how long it took (ms; None while it runs)."""
    replies = [
        parts_summary_full(m.parts)
        for m in Message.objects.filter(task=task, direction=Direction.REPLY).order_by(
            "created_at", "pk"
        )
    ]
    status = task.status_message if isinstance(task.status_message, dict) else {}
    if status.get("parts"):
        said = parts_summary_full(status["parts"])
        if said not in replies:
            replies.append(said)
    artifacts = [
        {"name": a.name or a.artifact_id, "text": parts_summary_full(a.parts)}
        for a in Artifact.objects.filter(task=task).order_by("created_at", "pk")
    ]
    text = "\n".join([*(r for r in replies if r), *(a["text"] for a in artifacts if a["text"])])
    ended = task.is_terminal or task.state in ("input-required", "auth-required")
    return {
        "taskId": task.pk,
        "agent": task.target.slug,
        "state": task.state,
        "text": text[:MAX_TEXT],
        "artifacts": artifacts,
        "durationMs": int((task.status_timestamp - task.created_at).total_seconds() * 1000)
        if ended
        else None,
    }


def parts_summary_full(parts: Any) -> str:
    """The text of `parts` (text parts as they are, data as compact JSON), one per line."""
    lines = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if "text" in part:
            lines.append(str(part["text"]))
        elif "data" in part:
            lines.append(json.dumps(part["data"], sort_keys=True, ensure_ascii=False))
        else:
            lines.append(parts_summary([part]))
    return "\n".join(lines)[:MAX_TEXT]


@dataclass(frozen=True)
class DiffLine:
    kind: str  # same | gone | new
    text: str


@dataclass(frozen=True)
class ItemView:
    item: ReplayItem
    target: str
    diff: list[DiffLine]
    same_text: bool
    same_state: bool
    artifacts: list[tuple[str, str, str]]  # (name, recorded text, replayed text)


@dataclass(frozen=True)
class ReplaySetView:
    replay_set: ReplaySet
    items: list[ItemView]
    counts: dict[str, int]  # outcome -> items


def text_diff(before: str, after: str) -> list[DiffLine]:
    """Line by line: what stayed, what went, what came."""
    lines = []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        tag, text = line[:2], line[2:]
        if tag == "  ":
            lines.append(DiffLine("same", text))
        elif tag == "- ":
            lines.append(DiffLine("gone", text))
        elif tag == "+ ":
            lines.append(DiffLine("new", text))
    return lines


def item_view(item: ReplayItem, replay_set: ReplaySet) -> ItemView:
    expected, actual = item.expected or {}, item.actual or {}
    before, after = str(expected.get("text", "")), str(actual.get("text", ""))
    names = [a["name"] for a in expected.get("artifacts", [])]
    names += [a["name"] for a in actual.get("artifacts", []) if a["name"] not in names]
    recorded = {a["name"]: a["text"] for a in expected.get("artifacts", [])}
    replayed = {a["name"]: a["text"] for a in actual.get("artifacts", [])}
    return ItemView(
        item=item,
        target=replay_set.target.slug if replay_set.target else item.original_target,
        diff=text_diff(before, after) if item.actual is not None else [],
        same_text=item.actual is not None and before == after,
        same_state=item.actual is not None and expected.get("state") == actual.get("state"),
        artifacts=[(n, recorded.get(n, ""), replayed.get(n, "")) for n in names],
    )


def replay_set_get(*, set_id: int) -> ReplaySetView:
    """A set with every item side by side. Raises `NotFound`."""
    replay_set = ReplaySet.objects.select_related("caller", "target").filter(pk=set_id).first()
    if replay_set is None:
        raise NotFound(f"no replay set {set_id}")
    items = [item_view(i, replay_set) for i in replay_set.items.order_by("position")]
    counts: dict[str, int] = {}
    for view in items:
        key = view.item.outcome or "pending"
        counts[key] = counts.get(key, 0) + 1
    return ReplaySetView(replay_set=replay_set, items=items, counts=counts)


def replay_sets_recent(*, limit: int = 50) -> list[ReplaySet]:
    return list(ReplaySet.objects.select_related("caller", "target")[:limit])


def replay_jsonl(*, set_id: int) -> Iterator[str]:
    """The set as JSON lines for evaluation tools: one per item, with its `input` (the
    message parts sent), `expected` (the recorded answer) and `actual` (the replayed one,
    null before a run), and what happened."""
    view = replay_set_get(set_id=set_id)
    for item_view_ in view.items:
        item = item_view_.item
        yield (
            json.dumps(
                {
                    "set": view.replay_set.pk,
                    "run": view.replay_set.runs,
                    "position": item.position,
                    "originalTaskId": item.original_id,
                    "target": item_view_.target,
                    "input": item.input,
                    "expected": item.expected,
                    "actual": item.actual,
                    "outcome": item.outcome or "pending",
                    "reason": item.reason,
                },
                ensure_ascii=False,
                sort_keys=True,
            )
            + "\n"
        )
