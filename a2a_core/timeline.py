"""Where a call's time goes inside the hub: per-call timestamps, for `bench/throughput.py
--timeline`.

Off unless HUB_TIMELINE names a file (read once, at import): then each A2A request's marks
(`mark("commit")` at the points the call passes) are appended to it as one line when the
request ends, `name:microseconds-since-received` separated by spaces. Off, a mark costs a
test of `ON`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar

PATH = os.environ.get("HUB_TIMELINE", "")
ON = bool(PATH)

Marks = list[tuple[str, int]]

_marks: ContextVar[Marks | None] = ContextVar("hub_timeline", default=None)
# The timelines of the requests whose items a group commit is writing (`a2a_core.storage.batching`).
_batch: ContextVar[tuple[Marks, ...]] = ContextVar("hub_timeline_batch", default=())
_lock = threading.Lock()
_out = open(PATH, "a", encoding="utf-8", buffering=1) if ON else None  # noqa: SIM115


def begin() -> Marks:
    """Start this request's timeline (its first mark: "receive")."""
    marks = [("receive", time.perf_counter_ns())]
    _marks.set(marks)
    return marks


def current() -> Marks | None:
    """The current request's timeline, to mark from another task (`mark_in`)."""
    return _marks.get()


def mark(name: str) -> None:
    """Note that the current request reached `name` (nothing outside a request)."""
    if ON:
        mark_in(_marks.get(), name)


def mark_in(marks: Marks | None, name: str) -> None:
    if marks is not None:
        marks.append((name, time.perf_counter_ns()))


def batch(members: list[Marks | None]) -> None:
    """Mark "batch" in the timelines of a group commit's members; until the next, `mark_batch`
    marks them (in the batch's context: see `carried`)."""
    found = [marks for marks in members if marks is not None]
    for marks in found:
        mark_in(marks, "batch")
    _batch.set(tuple(found))


def mark_batch(name: str) -> None:
    """Note that the current group commit reached `name`, in each member's timeline."""
    if ON:
        for marks in _batch.get():
            mark_in(marks, name)


def carried[R](fn: Callable[[], R]) -> Callable[[], R]:
    """`fn`, to run with this context's timelines wherever it runs (a group commit's, on a
    writer thread), when timelines are on, marking "taken" when it starts there and "written"
    when it returns: the hand-overs between the threads show apart from the work. Only the
    timeline's own variables go along: the thread keeps everything else of its own (its
    database connection above all)."""
    if not ON:
        return fn
    marks, batch = _marks.get(), _batch.get()

    def run() -> R:
        tokens = _marks.set(marks), _batch.set(batch)
        try:
            mark_batch("taken")
            result = fn()
            mark_batch("written")
            return result
        finally:
            _batch.reset(tokens[1])
            _marks.reset(tokens[0])

    return run


def end(marks: Marks) -> None:
    """Mark "answer" and write the request's line, if it was marked on the way (a call, not
    a card or a task read)."""
    if len(marks) < 2 or _out is None:
        return
    marks.append(("answer", time.perf_counter_ns()))
    start = marks[0][1]
    line = " ".join(f"{name}:{(at - start) // 1000}" for name, at in marks)
    with _lock:
        _out.write(line + "\n")
