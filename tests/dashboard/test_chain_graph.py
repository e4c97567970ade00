"""The delegation chain's layout: readable from one task to a few dozen, whatever the shape."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from dashboard.chain import GAP_X, LABEL_CHARS, NODE_H, NODE_W, chain_graph, pair_label

_ids = itertools.count(1)


def task(parent: Any = None, *, caller: str = "a", target: str = "b", state: str = "working"):
    """A stand-in for a Task row: the layout reads only these fields."""
    return SimpleNamespace(
        pk=f"t{next(_ids)}",
        parent_id=parent.pk if parent else None,
        caller=SimpleNamespace(slug=caller) if caller else None,
        target=SimpleNamespace(slug=target),
        state=state,
        skill="",
    )


def boxes_overlap(a, b) -> bool:
    return a.x < b.x + NODE_W and b.x < a.x + NODE_W and a.y < b.y + NODE_H and b.y < a.y + NODE_H


def assert_readable(graph, count: int) -> None:
    assert len(graph.nodes) == count
    for a, b in itertools.combinations(graph.nodes, 2):
        assert not boxes_overlap(a, b), (a, b)
    for node in graph.nodes:
        assert node.x >= 0 and node.x + NODE_W <= graph.width
        assert node.y >= 0 and node.y + NODE_H <= graph.height
        assert len(node.label) <= LABEL_CHARS


def test_a_single_task_is_one_node_and_no_edge():
    root = task(caller="", target="solo")
    graph = chain_graph([root], current=root.pk)
    assert [(n.label, n.current) for n in graph.nodes] == [("hub → solo", True)]
    assert graph.edges == []


def test_depth_goes_left_to_right_and_siblings_stack_under_a_centred_parent():
    root = task()
    kids = [task(root) for _ in range(3)]
    graph = chain_graph([root, *kids], current=kids[1].pk)
    at = {n.task_id: n for n in graph.nodes}
    assert all(at[k.pk].x == at[root.pk].x + NODE_W + GAP_X for k in kids)
    ys = [at[k.pk].y for k in kids]
    assert ys == sorted(ys) and len(set(ys)) == 3
    assert at[root.pk].y == ys[1]  # centred on its children
    assert {(e.parent, e.child) for e in graph.edges} == {(root.pk, k.pk) for k in kids}
    assert [n.task_id for n in graph.nodes if n.current] == [kids[1].pk]


@pytest.mark.parametrize("shape", ["line", "star", "tree"])
def test_thirty_tasks_lay_out_without_overlap_in_any_shape(shape: str):
    root = task()
    tasks = [root]
    for i in range(29):
        if shape == "line":
            parent = tasks[-1]
        elif shape == "star":
            parent = root
        else:
            parent = tasks[i // 2]  # a binary tree
        tasks.append(task(parent, caller=f"agent-{i}", target=f"agent-{i + 1}"))
    graph = chain_graph(sorted(tasks, key=lambda t: int(t.pk[1:])), current=tasks[7].pk)
    assert_readable(graph, 30)
    assert len(graph.edges) == 29
    if shape == "star":
        assert graph.width == 2 * 6 + 2 * NODE_W + GAP_X


def test_a_task_whose_parent_is_missing_starts_its_own_tree():
    orphan = task(SimpleNamespace(pk="gone"))
    other = task()
    graph = chain_graph([orphan, other], current=other.pk)
    assert_readable(graph, 2)
    assert graph.edges == []


def test_long_agent_names_are_shortened_to_fit_and_kept_whole_in_the_tooltip():
    long = "a-very-long-agent-name-that-goes-on-and-on"
    assert pair_label("alpha", "beta") == "alpha → beta"
    assert len(pair_label(long, "beta")) == LABEL_CHARS
    assert pair_label(long, "beta").endswith("… → beta")
    assert pair_label("alpha", long).startswith("alpha → a-very")
    assert len(pair_label(long, long)) == LABEL_CHARS
    node = chain_graph([t := task(caller=long, target=long)], current=t.pk).nodes[0]
    assert long in node.title and len(node.label) == LABEL_CHARS
