"""A trace laid out as a waterfall: where each bar and mark sits on the time axis (percent of
the trace's length), and the axis's ticks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from a2a_core.selectors.spans import SpanDetail
from a2a_core.selectors.traces import Mark, Span, Trace

TICKS = 5
# The narrowest bar drawn, in percent: an instant still shows.
MIN_WIDTH = 0.4


def duration(seconds: float) -> str:
    """`850 ms`, `4.2 s`, `3 min 5 s`: a length a human reads at a glance."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


@dataclass(frozen=True)
class PlacedMark:
    mark: Mark
    left: float
    offset: str


@dataclass(frozen=True)
class Row:
    span: Span
    left: float
    width: float
    length: str
    offset: str
    running: bool
    marks: list[PlacedMark]


@dataclass(frozen=True)
class Waterfall:
    trace: Trace
    rows: list[Row]
    ticks: list[tuple[float, str]]
    length: str


def waterfall(trace: Trace, *, now: datetime) -> Waterfall:
    total = max((trace.end - trace.start).total_seconds(), 0.001)

    def at(moment: datetime) -> float:
        return min(100.0, max(0.0, (moment - trace.start).total_seconds() / total * 100))

    def offset(moment: datetime) -> str:
        return "+" + duration(max(0.0, (moment - trace.start).total_seconds()))

    rows = []
    for span in trace.spans:
        end = span.end or now
        left = at(span.start)
        width = max(MIN_WIDTH, at(end) - left)
        rows.append(
            Row(
                span=span,
                left=left,
                width=min(width, 100 - left) if left < 100 else MIN_WIDTH,
                length=duration(max(0.0, (end - span.start).total_seconds())),
                offset=offset(span.start),
                running=span.end is None,
                marks=[PlacedMark(m, at(m.at), offset(m.at)) for m in span.marks],
            )
        )
    ticks = [
        (i * 100 / (TICKS - 1), duration(total * i / (TICKS - 1)) if i else "0")
        for i in range(TICKS)
    ]
    return Waterfall(trace=trace, rows=rows, ticks=ticks, length=duration(total))


WHO = {"hub": "the hub", "agent": "the agent", "human": "a human", "unmeasured": "not measured"}


@dataclass(frozen=True)
class Piece:
    """A segment of a span's time split, placed on its bar (percent of the span)."""

    who: str
    what: str
    us: int
    left: float
    width: float
    length: str


@dataclass(frozen=True)
class SplitView:
    pieces: list[Piece]
    # (who, in words, µs, length) for each who with time in the span, in a fixed order
    totals: list[tuple[str, str, int, str]]
    length: str


def split_view(span: SpanDetail) -> SplitView:
    total = max(span.duration_us, 1)
    pieces = [
        Piece(
            who=s.who,
            what=s.what,
            us=s.us,
            left=s.start_us / total * 100,
            width=s.us / total * 100,
            length=micros(s.us),
        )
        for s in span.segments
    ]
    totals = [
        (who, words, span.totals[who], micros(span.totals[who]))
        for who, words in WHO.items()
        if span.totals.get(who)
    ]
    return SplitView(pieces=pieces, totals=totals, length=micros(span.duration_us))


def micros(us: int) -> str:
    """`85 µs`, `4.21 ms`, then as `duration` says it: a stretch of the hub's time reads."""
    if us < 1000:
        return f"{us} µs"
    if us < 100_000:
        return f"{us / 1000:.2f} ms"
    return duration(us / 1_000_000)
