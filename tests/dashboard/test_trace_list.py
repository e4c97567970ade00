"""The trace list's filters and keyset pages, a span's page, and the replay screens' edges:
what a person sees for junk in the URL, and who may do what."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from a2a_core.models import Agent, ReplaySet, Task, TaskState
from a2a_core.selectors.trace_list import TraceFilter, trace_page
from a2a_core.services.replay import replay_caller, replay_set_create
from tests.factories import T0, make_task, record_message, register

pytestmark = pytest.mark.django_db


@pytest.fixture
def agents() -> dict[str, Agent]:
    return {slug: register(slug).agent for slug in ("alpha", "beta", "gamma")}


def a_trace(
    n: int,
    caller: Agent,
    target: Agent,
    *,
    seconds: float = 1,
    state: str = "completed",
    child: Agent | None = None,
) -> Task:
    start = T0 + timedelta(minutes=n)
    root = make_task(target=target, caller=caller, state=state, trace_id=f"{n:032x}")
    Task.objects.filter(pk=root.pk).update(
        created_at=start, status_timestamp=start + timedelta(seconds=seconds)
    )
    if child is not None:
        make_task(
            target=child,
            caller=target,
            state=state,
            trace_id=f"{n:032x}",
            root=root,
            parent=root,
            depth=1,
        )
    root.refresh_from_db()
    return root


def rows(response: Any) -> list[str]:
    page = response.context["page"]
    assert page is not None, response.context["form"].errors
    return [row.trace_id for row in page.rows]


def test_filters_find_traces_by_an_agent_anywhere_a_pair_duration_and_state(agents, as_role):
    alpha, beta, gamma = agents["alpha"], agents["beta"], agents["gamma"]
    short = a_trace(1, alpha, beta, seconds=0.2)
    chain = a_trace(2, alpha, beta, seconds=3, child=gamma)
    failed = a_trace(3, beta, alpha, seconds=1, state=TaskState.FAILED)
    client = as_role("viewer")
    assert rows(client.get("/traces/")) == [failed.trace_id, chain.trace_id, short.trace_id]
    assert rows(client.get("/traces/?agent=gamma")) == [chain.trace_id]
    assert rows(client.get("/traces/?caller=beta&target=gamma")) == [chain.trace_id]
    assert rows(client.get("/traces/?caller=beta&target=alpha")) == [failed.trace_id]
    assert rows(client.get("/traces/?min=2s")) == [chain.trace_id]
    assert rows(client.get("/traces/?max=500ms")) == [short.trace_id]
    assert rows(client.get("/traces/?error=1")) == [failed.trace_id]
    assert rows(client.get("/traces/?state=failed")) == [failed.trace_id]
    assert rows(client.get("/traces/?agent=nobody")) == []


def test_refused_calls_count_as_a_trace_s_decisions(agents, as_role):
    root = a_trace(1, agents["alpha"], agents["beta"])
    a_trace(2, agents["alpha"], agents["beta"])
    record_message(
        sender=agents["beta"],
        target=agents["gamma"],
        decision="reject",
        decision_reason="loop_detected",
        trace_id=root.trace_id,
        at=T0 + timedelta(minutes=1, seconds=0.5),
    )
    client = as_role("viewer")
    assert rows(client.get("/traces/?decision=reject")) == [root.trace_id]
    assert rows(client.get("/traces/?error=1")) == [root.trace_id]


def test_pages_follow_each_other_without_gaps_or_repeats(agents):
    made = [a_trace(n, agents["alpha"], agents["beta"]).trace_id for n in range(7)]
    seen, cursor = [], ""
    while True:
        page = trace_page(filters=TraceFilter(), cursor=cursor, limit=3)
        seen += [row.trace_id for row in page.rows]
        if not page.older:
            break
        cursor = page.older
    assert seen == list(reversed(made))


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("min=fast", "min"),
        ("max=-3s", "max"),
        ("state=sleeping", "state"),
        ("cursor=bm90LWEtY3Vyc29y", "cursor"),
        ("agent=not%20a%20slug", "agent"),
        ("since=2026-01-02T00:00&until=2026-01-01T00:00", "until"),
        ("decision=maybe", "decision"),
    ],
)
def test_junk_in_the_url_is_named_on_the_page_not_a_server_error(agents, as_role, query, field):
    response = as_role("viewer").get(f"/traces/?{query}")
    assert response.status_code == 200
    assert response.context["page"] is None
    assert field in response.context["form"].errors
    assert b"form-errors" in response.content


def test_a_span_s_page_and_its_edges(agents, as_role):
    root = a_trace(1, agents["alpha"], agents["beta"])
    record_message(sender=agents["alpha"], target=agents["beta"], task=root, summary="hello")
    client = as_role("viewer")
    page = client.get(f"/traces/{root.trace_id}/spans/{root.pk}/")
    assert page.status_code == 200 and b"span-panel-body" in page.content
    assert client.get(f"/traces/{'f' * 32}/spans/{root.pk}/").status_code == 404
    assert client.get(f"/traces/{root.trace_id}/spans/no-such-task/").status_code == 404


def test_only_operators_make_and_run_replays_and_a_bad_target_is_named(agents, as_role):
    root = a_trace(1, agents["alpha"], agents["beta"])
    record_message(sender=agents["alpha"], target=agents["beta"], task=root, summary="hello")
    assert as_role("viewer").get(f"/replays/new/?task={root.pk}").status_code == 403
    operator = as_role("operator")
    form = operator.get(f"/replays/new/?task={root.pk}")
    assert form.status_code == 200 and form.context["count"] == 1
    token = form.cookies["csrftoken"].value
    refused = operator.post(
        "/replays/make/", {"task": root.pk, "to": "nobody", "csrfmiddlewaretoken": token}
    )
    assert refused.status_code == 400 and b"nobody" in refused.content
    assert not ReplaySet.objects.exists()
    viewer = as_role("viewer")
    assert viewer.post("/replays/1/rerun/").status_code == 403
    made = replay_set_create(task_ids=[root.pk], caller=replay_caller())
    assert viewer.get(f"/replays/{made.pk}/").status_code == 200
    assert viewer.get("/replays/").status_code == 200
    assert viewer.get("/replays/999/").status_code == 404
    export = viewer.get(f"/replays/{made.pk}/export.jsonl")
    assert b"".join(export.streaming_content).count(b"\n") == 1


def test_a_replay_caller_name_taken_by_another_agent_is_refused(agents):
    from a2a_core.errors import ValidationFailed

    with pytest.raises(ValidationFailed, match="not one of the hub's replay callers"):
        replay_caller(slug="alpha")
