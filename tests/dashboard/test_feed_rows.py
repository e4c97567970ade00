"""The live feed draws rows from what traffic events carry: the same rows the database draws."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from a2a_core.events import add_local_listener, remove_local_listener
from a2a_core.models import Message, TaskState
from a2a_core.schemas.events import TrafficItem
from a2a_core.selectors.traffic import TrafficFilter, feed_rows_by_pk
from a2a_core.services.classify import message_item
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.policy import policy_publish
from a2a_core.services.task_states import task_item
from a2a_core.services.tasks import Reply, tasks_record
from dashboard.consumers import feed_shown
from dashboard.live import feed_row, render_update
from tests.dashboard.test_task_live_frames import open_page
from tests.factories import held_escalation, make_task, record_message, register

pytestmark = pytest.mark.django_db


def traffic(*items: TrafficItem | dict) -> list:
    return [{"type": "hub.event", "event": "traffic", "items": list(items)}]


@pytest.fixture
def pair():
    return register("feed-caller").agent, register("feed-target").agent


def drawn_from_database(message: Message) -> str:
    return feed_row(feed_rows_by_pk([message.pk])[message.pk]).html


def test_a_request_row_from_its_event_is_the_row_the_database_draws_without_a_query(
    pair, django_assert_num_queries
):
    caller, target = pair
    task = make_task(target=target, caller=caller, state=TaskState.WORKING)
    message = record_message(
        caller,
        target,
        task=task,
        summary="<b>deploy</b> the <script>alert(1)</script> build",
        latency_ms=42,
        decision_latency_us=7,
    )
    item = message_item(message, task)
    render_update(traffic(item))  # the relay learns the agents' names once

    with django_assert_num_queries(0):
        (row,) = render_update(traffic(item)).rows

    assert row.html == drawn_from_database(message)
    assert "&lt;script&gt;" in row.html and "<script>" not in row.html
    assert f'data-message="{message.pk}"' in row.html and "42 ms" in row.html
    assert row.agent_ids == {caller.pk, target.pk} and row.task_id == task.pk


def test_refused_redirected_human_and_broadcast_rows_match_the_database(pair):
    caller, target = pair
    other = register("feed-other").agent
    operator = get_user_model().objects.create_user(username="ops-ana", password="x")
    rows = [
        record_message(
            caller,
            target,
            decision="reject",
            decision_reason="denied_by_matrix",
            decision_detail="feed-caller may not call feed-target",
        ),
        record_message(
            caller, target, decision="redirect", decision_reason="redirect", redirected_to=other
        ),
        record_message(None, target, author=operator, kind="response", direction="reply"),
        record_message(caller, None, kind="broadcast", recipients=["feed-target", "feed-other"]),
    ]
    items = [message_item(m, None) for m in rows]
    assert all(item.row is not None for item in items)

    drawn = render_update(traffic(*items)).rows

    # Newest first, as the feed shows them.
    assert [r.html for r in drawn] == [drawn_from_database(m) for m in reversed(rows)]
    html = "".join(r.html for r in drawn)
    assert "denied_by_matrix" in html and "↪ feed-other" in html
    assert "ops-ana (human)" in html and "2 agents" in html


def test_an_event_without_its_row_is_read_from_the_database(pair):
    _, target = pair
    operator = get_user_model().objects.create_user(username="ops-ben", password="x")
    recorded = record_message(None, target, author=operator, summary="read back")
    # Loaded without its author: the event cannot name them without a query.
    bare = Message.objects.get(pk=recorded.pk)
    item = message_item(bare, None)
    assert item.row is None

    (row,) = render_update(traffic(item)).rows

    assert row.html == drawn_from_database(recorded)
    assert "read back" in row.html and "ops-ben (human)" in row.html


def test_a_task_changing_state_updates_its_messages_rows_and_adds_no_row_of_its_own(pair):
    caller, target = pair
    task = make_task(target=target, caller=caller, state=TaskState.WORKING)
    record_message(caller, target, task=task, summary="work on it")
    page = open_page("traffic")
    page.shown = feed_shown(TrafficFilter())
    task.state = TaskState.COMPLETED

    update = render_update(traffic(task_item(task, "updated")))
    frame = page.frame(update)

    assert update.rows == []
    assert f'hx-swap-oob="outerHTML:.task-state-{task.pk}">completed</span>' in frame


def test_a_message_published_twice_is_one_row_and_updates_only_rows_on_the_page(pair):
    caller, target = pair
    task = make_task(target=target, caller=caller, state=TaskState.WORKING)
    message = record_message(caller, target, task=task, summary="once, please")
    page = open_page("traffic")
    item = message_item(message, task)

    first = page.frame(render_update(traffic(item, item)))
    again = page.frame(render_update(traffic(item)))

    assert first.count(f'data-message="{message.pk}"') == 1
    assert f'data-message="{message.pk}"' not in again
    elsewhere = render_update(traffic({"type": "answered", "message_pk": 999_999, "latency_ms": 5}))
    assert "latency-999999" not in page.frame(elsewhere)


def test_a_request_row_drawn_before_its_answer_shows_the_latency_when_the_answer_comes(
    pair, django_capture_on_commit_callbacks
):
    caller, target = pair
    task = make_task(target=target, caller=caller, state=TaskState.WORKING)
    request = record_message(
        caller, target, task=task, summary="how long?", at=timezone.now() - timedelta(seconds=2)
    )
    drawn = drawn_from_database(request)
    assert f'<span class="latency-{request.pk}"><span class="muted">—</span></span>' in drawn

    events: list = []
    add_local_listener(listen := lambda group, payload: events.append((group, payload)))
    try:
        with django_capture_on_commit_callbacks(execute=True):
            tasks_record(
                [
                    Reply(
                        task.pk,
                        {"messageId": "r-1", "role": "ROLE_AGENT", "parts": [{"text": "done"}]},
                        (request.pk, request.created_at),
                    )
                ]
            )
    finally:
        remove_local_listener(listen)
    page = open_page("traffic")
    page.shown = feed_shown(TrafficFilter())
    frame = page.frame(render_update([p for group, p in events if group == "traffic"]))

    latency = Message.objects.get(pk=request.pk).latency_ms
    assert latency is not None and 2000 <= latency < 60_000
    assert (
        f'<span class="latency-{request.pk}" hx-swap-oob="outerHTML:.latency-{request.pk}">'
        f"{latency} ms</span>" in frame
    )
    paused = open_page("traffic")
    paused.paused = True
    assert f"latency-{request.pk}" not in paused.frame(
        render_update([p for group, p in events if group == "traffic"])
    )


def test_no_update_goes_to_a_row_the_page_has_dropped_for_newer_ones(pair):
    caller, target = pair
    page = open_page("traffic")
    oldest = record_message(caller, target, summary="the oldest row")
    page.shown = feed_shown(TrafficFilter())
    for pk in range(10**6, 10**6 + 300):  # 300 newer rows push it off the page
        page.shown.add(pk, "")

    update = render_update(traffic({"type": "answered", "message_pk": oldest.pk, "latency_ms": 9}))

    assert f"latency-{oldest.pk}" not in page.frame(update)


def _decision_cell(row_html: str, message_pk: int) -> str:
    """What a row shows in its decision cell: its badge and the reason."""
    start = row_html.index(f'<span class="decision-{message_pk}">')
    return row_html[start : row_html.index("</td>", start)]


def test_a_live_row_names_the_policy_version_that_decided_and_its_author(pair):
    caller, target = pair
    policy_publish(document={"maxHops": 4}, reason="shorter chains", actor_label="alice")
    message = record_message(caller, target, summary="judged by v1", decision_policy_version=1)

    (row,) = render_update(traffic(message_item(message, None))).rows

    assert row.html == drawn_from_database(message)
    assert '<span class="decider" title="who made this decision">· policy v1 by alice</span>' in (
        row.html
    )


def test_a_held_messages_row_shows_the_humans_decision_live_as_a_reload_shows_it(
    django_capture_on_commit_callbacks,
):
    escalation = held_escalation("ship it?")
    message = escalation.message
    assert message is not None
    page = open_page("traffic")
    page.shown = feed_shown(TrafficFilter())  # the page shows the held row
    assert '<span class="badge hold">' in drawn_from_database(message)

    events: list = []
    add_local_listener(listen := lambda group, payload: events.append((group, payload)))
    try:
        with django_capture_on_commit_callbacks(execute=True):
            escalation_approve(escalation_id=escalation.pk, actor_label="operator")
    finally:
        remove_local_listener(listen)
    frame = page.frame(render_update([payload for group, payload in events if group == "traffic"]))

    shown = _decision_cell(drawn_from_database(message), message.pk)  # what a reload shows
    assert '<span class="badge deliver">' in shown and "approved by operator" in shown
    assert '<span class="decider" title="who made this decision">· operator</span>' in shown
    live = shown.replace(
        f'<span class="decision-{message.pk}">',
        f'<span class="decision-{message.pk}" hx-swap-oob="outerHTML:.decision-{message.pk}">',
        1,
    )
    assert live in frame
    # Updated in place: no second row for the message.
    assert f'data-message="{message.pk}"' not in frame
    assert f'hx-swap-oob="outerHTML:.task-state-{message.task_id}">working</span>' in frame


def test_a_message_held_and_approved_within_one_flush_gets_its_row_with_the_decision(
    django_capture_on_commit_callbacks,
):
    escalation = held_escalation("ship it?")
    message = escalation.message
    assert message is not None
    held = message_item(message, escalation.task)
    page = open_page("traffic")  # opened before the message was held: no row for it yet

    events: list = []
    add_local_listener(listen := lambda group, payload: events.append((group, payload)))
    try:
        with django_capture_on_commit_callbacks(execute=True):
            escalation_approve(escalation_id=escalation.pk, actor_label="operator")
    finally:
        remove_local_listener(listen)
    frame = page.frame(
        render_update(traffic(held) + [p for group, p in events if group == "traffic"])
    )

    assert frame.count(f'data-message="{message.pk}"') == 1
    assert _decision_cell(frame, message.pk) == _decision_cell(
        drawn_from_database(message), message.pk
    )


def test_an_event_with_a_field_no_event_has_draws_nothing(pair):
    caller, target = pair
    message = record_message(caller, target, summary="smuggled")
    item = message_item(message, None).model_dump()
    item["row"]["summary_html"] = "<b>not escaped</b>"

    update = render_update(traffic(item))

    assert update.rows == []
