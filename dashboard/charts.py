"""Small charts drawn on the server as inline SVG and CSS widths: no chart library, no script.

A sparkline lives in a `viewBox="0 0 WIDTH HEIGHT"` stretched to its box
(`preserveAspectRatio="none"`, strokes with `vector-effect="non-scaling-stroke"`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

WIDTH = 120
HEIGHT = 36
# Room around the line so that its stroke and end dot are not clipped.
PAD = 2.0


@dataclass(frozen=True)
class Sparkline:
    # SVG polyline points, "x,y x,y ...", one per value that is not None.
    points: str
    # The same line closed down to the baseline: the shaded area under it.
    area: str
    # The last point drawn, as the SVG path of a dot (a zero-length line with round caps:
    # unlike a circle, it stays round when the chart is stretched).
    dot: str

    @property
    def drawn(self) -> bool:
        return bool(self.points)


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def sparkline(values: Sequence[float | None], *, top: float | None = None) -> Sparkline:
    """A line over `values`, evenly spread across the width; `top` is the value drawn at the
    top (default: the largest). A None is a slot with no data: the line joins its neighbours."""
    present = [v for v in values if v is not None]
    top = max([top or 0, *present, 0]) or 1
    step = (WIDTH - 2 * PAD) / max(1, len(values) - 1)
    span = HEIGHT - 2 * PAD
    coords = [
        (PAD + i * step, HEIGHT - PAD - (v / top) * span)
        for i, v in enumerate(values)
        if v is not None
    ]
    if not coords:
        return Sparkline("", "", "")
    points = " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in coords)
    area = f"{_fmt(coords[0][0])},{_fmt(HEIGHT)} {points} {_fmt(coords[-1][0])},{_fmt(HEIGHT)}"
    last_x, last_y = coords[-1]
    return Sparkline(points, area, f"M{_fmt(last_x)},{_fmt(last_y)}h0")


@dataclass(frozen=True)
class Share:
    key: str
    label: str
    count: int
    # Of the total, for the legend ("42%").
    percent: int
    # CSS width of its segment or bar, "12.34%".
    width: str
    # Where a click on it leads.
    href: str = ""


def shares(counts: Mapping[str, int], labels: Mapping[str, str]) -> list[Share]:
    """Each key's part of the total, in the order of `labels`: segments of a stacked bar."""
    total = sum(counts.get(key, 0) for key in labels)
    return [
        Share(
            key,
            label,
            counts.get(key, 0),
            round(100 * counts.get(key, 0) / total) if total else 0,
            f"{100 * counts.get(key, 0) / total:.2f}%" if total else "0%",
        )
        for key, label in labels.items()
    ]


def bars(items: Sequence[tuple[str, int]]) -> list[Share]:
    """Horizontal bars, each as long as its count relative to the largest."""
    top = max((count for _, count in items), default=0) or 1
    return [
        Share(key, key, count, round(100 * count / top), f"{100 * count / top:.2f}%")
        for key, count in items
    ]


@dataclass(frozen=True)
class Slot:
    """One value of a sparkline as a link: a band of the chart's width to click."""

    x: str
    width: str
    href: str
    title: str


def slots(count: int, hrefs: Sequence[str], titles: Sequence[str]) -> list[Slot]:
    """Click bands centred on the points of a `count`-value sparkline."""
    step = (WIDTH - 2 * PAD) / max(1, count - 1)
    return [
        Slot(_fmt(max(0.0, PAD + i * step - step / 2)), _fmt(step), href, title)
        for i, (href, title) in enumerate(zip(hrefs, titles, strict=True))
    ]
