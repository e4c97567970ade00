"""A delegation chain laid out for an inline SVG: one box per task, depth from left to right,
children stacked top to bottom under their parent's row, each parent centred on its children.

Pure layout (no ORM, no HTML): the template draws it, so agent text stays autoescaped. Each
box is a nested <svg>, which clips its text: a label never spills out of its box.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from a2a_core.models import Task

NODE_W = 236
NODE_H = 44
GAP_X = 48
GAP_Y = 12
PAD = 6
# What fits on a node's first line at the graph's font size.
LABEL_CHARS = 28


@dataclass(frozen=True)
class Node:
    task_id: str
    state: str
    x: int
    y: int
    label: str  # "caller → target", shortened to fit
    meta: str  # "state · skill"
    title: str  # everything, unshortened, for the tooltip
    current: bool


@dataclass(frozen=True)
class Edge:
    parent: str
    child: str
    d: str  # SVG path data


@dataclass(frozen=True)
class ChainGraph:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int
    node_w: int = NODE_W
    node_h: int = NODE_H


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"


def pair_label(caller: str, target: str, limit: int = LABEL_CHARS) -> str:
    """`caller → target` in at most `limit` characters; a long name gives up its end first."""
    room = limit - 3
    if len(caller) + len(target) <= room:
        return f"{caller} → {target}"
    half = room // 2
    if len(caller) <= half:
        target = _shorten(target, room - len(caller))
    elif len(target) <= half:
        caller = _shorten(caller, room - len(target))
    else:
        caller, target = _shorten(caller, half), _shorten(target, room - half)
    return f"{caller} → {target}"


def chain_graph(tasks: Sequence[Task], *, current: str) -> ChainGraph:
    """Lay out `tasks` (ordered by depth, then age) as a forest: a task whose parent is not
    among them starts a tree of its own. `current` is highlighted."""
    known = {task.pk for task in tasks}
    children: dict[str, list[Task]] = {task.pk: [] for task in tasks}
    roots: list[Task] = []
    for task in tasks:
        if task.parent_id in known and task.parent_id != task.pk:
            children[str(task.parent_id)].append(task)
        else:
            roots.append(task)

    places: dict[str, tuple[int, float]] = {}
    next_row = 0

    def place(task: Task, level: int) -> float:
        nonlocal next_row
        kids = [kid for kid in children[task.pk] if kid.pk not in places]
        places[task.pk] = (level, 0.0)  # claimed: a cycle in bad data cannot recurse forever
        if kids:
            rows = [place(kid, level + 1) for kid in kids]
            row = (rows[0] + rows[-1]) / 2
        else:
            row = float(next_row)
            next_row += 1
        places[task.pk] = (level, row)
        return row

    for root in roots:
        place(root, 0)
    for task in tasks:  # only a parent cycle (bad data) leaves a task unplaced
        if task.pk not in places:
            place(task, 0)

    def x_of(level: int) -> int:
        return PAD + level * (NODE_W + GAP_X)

    def y_of(row: float) -> int:
        return PAD + round(row * (NODE_H + GAP_Y))

    nodes = []
    for task in tasks:
        level, row = places[task.pk]
        caller = task.caller.slug if task.caller else "hub"
        target = task.target.slug
        meta = task.state + (f" · {task.skill}" if task.skill else "")
        nodes.append(
            Node(
                task_id=task.pk,
                state=task.state,
                x=x_of(level),
                y=y_of(row),
                label=pair_label(caller, target),
                meta=_shorten(meta, LABEL_CHARS + 4),
                title=f"{caller} → {target}: {meta} (task {task.pk})",
                current=task.pk == current,
            )
        )
    edges = []
    for parent_id, kids in children.items():
        p_level, p_row = places[parent_id]
        x1, y1 = x_of(p_level) + NODE_W, y_of(p_row) + NODE_H // 2
        for kid in kids:
            c_level, c_row = places[kid.pk]
            x2, y2 = x_of(c_level), y_of(c_row) + NODE_H // 2
            bend = (x1 + x2) // 2
            edges.append(
                Edge(parent_id, kid.pk, f"M{x1},{y1} C{bend},{y1} {bend},{y2} {x2 + 1},{y2}")
            )
    levels = max((level for level, _ in places.values()), default=0) + 1
    return ChainGraph(
        nodes=nodes,
        edges=edges,
        width=2 * PAD + levels * NODE_W + (levels - 1) * GAP_X,
        height=2 * PAD + max(next_row, 1) * NODE_H + max(next_row - 1, 0) * GAP_Y,
    )
