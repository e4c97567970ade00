"""The overview: the last hour's numbers, drawn as small charts, for every role."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from a2a_core.models import Agent, AgentStatus, Escalation, Message, TaskState
from a2a_core.policy import clock
from a2a_core.schemas.policy import Breaker
from a2a_core.selectors.stats import overview_stats, percentile
from a2a_core.storage.policy_state import policy_state
from dashboard import live
from dashboard.views.overview import overview_numbers
from tests.factories import make_task, register

pytestmark = pytest.mark.django_db


def stored(
    ago: float,
    *,
    decision: str = "deliver",
    reason: str = "ok",
    latency_ms: int | None = None,
    sender: Agent | None = None,
    target: Agent | None = None,
    direction: str = "request",
) -> Message:
    """A message recorded `ago` seconds before now."""
    message = Message.objects.create(
        message_id=f"m-{Message.objects.count()}",
        role="user",
        kind="request",
        direction=direction,
        sender=sender,
        target=target,
        decision=decision,
        decision_reason=reason,
        latency_ms=latency_ms,
        summary="hello",
    )
    # created_at is set on insert; put the message back in time.
    Message.objects.filter(pk=message.pk).update(created_at=timezone.now() - timedelta(seconds=ago))
    return message


@pytest.fixture
def known_hour() -> None:
    """Three minutes of traffic just now, one message 40 minutes ago, one two hours ago.

    Times sit mid-minute so that a slow test run cannot move one into the next minute.
    """
    alpha, beta = register("alpha").agent, register("beta").agent
    pair = {"sender": alpha, "target": beta}
    for latency in (10, 20, 30):
        stored(20, latency_ms=latency, **pair)
    stored(20, latency_ms=15, direction="reply", **pair)  # a reply: not a request's latency
    stored(90, decision="reject", reason="denied_by_matrix", **pair)
    stored(95, decision="reject", reason="denied_by_matrix", **pair)
    stored(100, decision="reject", reason="rate_limited", **pair)
    stored(150, decision="hold", reason="approval:urgent", **pair)
    stored(40 * 60 + 30, decision="redirect", reason="suspended", latency_ms=100, **pair)
    stored(2 * 3600, decision="reject", reason="too_old_to_count", latency_ms=9999, **pair)


def tile(page: str, tile_id: str) -> str:
    """The HTML of one stat tile."""
    found = re.search(rf'<section class="stat" id="{tile_id}".*?</section>', page, re.S)
    assert found, f"no tile {tile_id}"
    return found.group(0)


def value(html: str) -> str:
    found = re.search(r'<div class="value[^"]*">(.*?)</div>', html, re.S)
    assert found
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def polylines(html: str) -> list[list[str]]:
    """Every sparkline in `html`, as its list of points."""
    return [points.split() for points in re.findall(r'<polyline[^>]*points="([^"]*)"', html)]


# --- the numbers ---------------------------------------------------------------------------


def test_the_last_hour_is_counted_by_minute_decision_reason_and_latency(known_hour):
    stats = overview_stats()

    assert len(stats.per_minute) == 30
    assert stats.per_minute[-3:] == [1, 3, 4]  # hold · three rejections · four just now
    assert sum(stats.per_minute) == 8  # the redirect 40 minutes ago is outside the line
    assert stats.messages_hour == 9
    assert stats.decisions == {"deliver": 4, "hold": 1, "redirect": 1, "reject": 3}
    assert stats.rejections == [("denied_by_matrix", 2), ("rate_limited", 1)]
    # Answered requests: 10, 20, 30 and 100 ms (nearest rank).
    assert (stats.latency.p50, stats.latency.p95, stats.latency.answered) == (20, 100, 4)
    assert [b.answered for b in stats.latency_buckets] == [0] * 3 + [1] + [0] * 7 + [3]
    assert (stats.latency_buckets[-1].p50, stats.latency_buckets[-1].p95) == (20, 30)


def test_the_numbers_take_a_fixed_number_of_queries(known_hour, django_assert_max_num_queries):
    # Two of the message table, agents, escalations, and the breakers when they live in the
    # database (not with Redis).
    with django_assert_max_num_queries(5):
        overview_stats()


def test_percentiles_are_nearest_rank():
    samples = [(value, 1) for value in range(1, 101)]
    assert (percentile(samples, 50), percentile(samples, 95)) == (50, 95)
    assert percentile([(7, 3)], 95) == 7
    assert percentile([], 50) is None


def test_agents_are_counted_by_what_they_are_doing():
    idle, busy = register("idle").agent, register("busy").agent
    Agent.objects.filter(pk__in=[idle.pk, busy.pk]).update(status=AgentStatus.ONLINE)
    make_task(target=busy, state=TaskState.WORKING)
    Agent.objects.filter(pk=register("away").agent.pk).update(status=AgentStatus.OFFLINE)
    Agent.objects.filter(pk=register("stopped").agent.pk).update(status=AgentStatus.SUSPENDED)

    stats = overview_stats()

    assert stats.agents == {"idle": 1, "busy": 1, "offline": 1, "suspended": 1}
    assert stats.agents_online == 2


# --- the page ------------------------------------------------------------------------------


def test_every_role_sees_the_overview(as_role, client, django_user_model):
    for role in ("viewer", "operator", "admin"):
        response = as_role(role).get("/")
        assert response.status_code == 200
        assert "At a glance" in response.content.decode()
    client.force_login(django_user_model.objects.create_user("nobody", password="x" * 20))
    assert client.get("/").status_code == 403


def test_the_page_shows_the_known_hour_as_numbers_and_charts(known_hour, as_role):
    page = as_role("viewer").get("/").content.decode()

    rate = tile(page, "stat-rate")
    assert value(rate) == "4"
    assert "9 in the last hour" in rate
    [line] = polylines(rate)
    assert len(line) == 30  # one point a minute
    latency = tile(page, "stat-latency")
    assert value(latency) == "20ms · 100ms"
    assert [len(points) for points in polylines(latency)] == [2, 2]  # p95 and p50, 2 buckets
    decisions = re.search(r'id="decisions".*?</section>', page, re.S)
    assert decisions
    legend = re.sub(r"<[^>]+>|\s+", " ", decisions.group(0))
    assert "Delivered 4 (44%)" in re.sub(r" +", " ", legend)
    assert "Rejected 3 (33%)" in re.sub(r" +", " ", legend)
    assert decisions.group(0).count('style="width:') == 4
    rejections = re.search(r'id="rejections".*?</section>', page, re.S)
    assert rejections
    assert rejections.group(0).index("denied_by_matrix") < rejections.group(0).index("rate_limited")
    assert "too_old_to_count" not in rejections.group(0)
    # The compact feed lists the newest messages, whatever their age; the page is live.
    assert page.count('<tr class="fresh" data-message=') == 10
    assert 'ws-connect="/ws/dashboard/?page=overview"' in page


def test_with_no_traffic_the_page_says_so(as_role):
    page = as_role("viewer").get("/").content.decode()

    assert value(tile(page, "stat-rate")) == "0"
    assert value(tile(page, "stat-latency")) == "—"
    assert "No messages in the last hour." in page
    assert "Nothing was rejected in the last hour." in page
    assert "Every breaker is closed." in page
    assert "Nobody is waiting for a human." in page
    assert "No traffic yet." in page


def test_open_breakers_and_pending_escalations_are_listed(as_role):
    caller, down = register("caller").agent, register("down").agent
    policy_state().record("down", False, Breaker(failure_threshold=1), clock.now())
    message = stored(5, decision="hold", reason="approval:urgent", sender=caller, target=down)
    Escalation.objects.create(
        kind="approval",
        message=message,
        task=make_task(target=down, caller=caller),
        agent=caller,
        question="Let it through?",
    )

    page = as_role("viewer").get("/").content.decode()

    breakers = tile(page, "stat-breakers")
    assert value(breakers) == "1"
    assert "down" in breakers and 'class="badge open"' in breakers and "data-deadline=" in breakers
    escalations = tile(page, "stat-escalations")
    assert value(escalations) == "1" and 'href="/escalations/"' in escalations


def test_agent_text_in_breakers_and_reasons_is_escaped(as_role):
    evil = "<img src=x onerror=alert(1)>"
    policy_state().record(evil, False, Breaker(failure_threshold=1), clock.now())
    stored(5, decision="reject", reason="<script>alert(1)</script>")

    page = as_role("viewer").get("/").content.decode()

    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert evil not in page and "<script>alert(1)" not in page


def test_an_htmx_request_gets_only_the_numbers(as_role):
    response = as_role("viewer").get("/", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.startswith('<div id="overview-numbers">')
    assert "<html" not in html and "feed-rows" not in html


# --- live ----------------------------------------------------------------------------------


def test_the_ticker_renders_the_numbers_to_swap_in_place(known_hour):
    assert live.Relay().tickers["overview"] is overview_numbers

    html = overview_numbers()

    assert html.startswith('<div id="overview-numbers" hx-swap-oob="true">')
    assert value(tile(html, "stat-rate")) == "4"
    assert "feed-rows" not in html
