"""The overview: the hub at a glance, its numbers refreshed live, and a compact live feed."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.http import HttpResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse

from a2a_core.models import AgentStatus, Decision
from a2a_core.selectors.stats import LATENCY_BUCKET, RATE_MINUTES, Overview, overview_stats
from a2a_core.selectors.traffic import TrafficFilter, traffic_recent
from dashboard import charts, live
from dashboard.http import HtmxHttpRequest
from dashboard.roles import viewer_required

FEED_ROWS = 25
DECISION_LABELS = dict(Decision.choices)
AGENT_LABELS = {
    AgentStatus.BUSY.value: "busy",
    AgentStatus.IDLE.value: "idle",
    AgentStatus.OFFLINE.value: "offline",
    AgentStatus.SUSPENDED.value: "suspended",
}


def _audit(**query: Any) -> str:
    return f"{reverse('dashboard:audit')}?{urlencode(query)}"


def _moment(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S")


def _windows(end: datetime, seconds: int, count: int) -> list[tuple[datetime, datetime]]:
    """`count` windows of `seconds` ending at `end`, oldest first."""
    return [
        (
            end - timedelta(seconds=seconds * (count - i)),
            end - timedelta(seconds=seconds * (count - 1 - i)),
        )
        for i in range(count)
    ]


def _links(stats: Overview, latency_top: int) -> dict[str, Any]:
    """Where each point and bar of the charts leads: the audit log, filtered to it."""
    end = stats.at.replace(microsecond=0) + timedelta(seconds=1)
    minutes = _windows(end, 60, len(stats.per_minute))
    buckets = _windows(end, LATENCY_BUCKET, len(stats.latency_buckets))
    hour = {"since": _moment(end - timedelta(hours=1)), "until": _moment(end)}
    return {
        "rate_slots": charts.slots(
            len(minutes),
            [_audit(since=_moment(a), until=_moment(b)) for a, b in minutes],
            [
                f"{a:%H:%M}: {n} message{'s' if n != 1 else ''}"
                for (a, _), n in zip(minutes, stats.per_minute, strict=True)
            ],
        ),
        "rate_top": max(stats.per_minute, default=0),
        "latency_slots": charts.slots(
            len(buckets),
            [_audit(since=_moment(a), until=_moment(b)) for a, b in buckets],
            [
                f"{a:%H:%M} to {b:%H:%M}: p50 {q.p50 if q.p50 is not None else '—'} ms, "
                f"p95 {q.p95 if q.p95 is not None else '—'} ms"
                for (a, b), q in zip(buckets, stats.latency_buckets, strict=True)
            ],
        ),
        "latency_top": latency_top,
        "decisions": [
            replace(share, href=_audit(decision=share.key, **hour))
            for share in charts.shares(stats.decisions, DECISION_LABELS)
        ],
        "rejections": [
            replace(bar, href=_audit(decision="reject", reason=bar.key, **hour))
            for bar in charts.bars(stats.rejections)
        ],
    }


def numbers_context() -> dict[str, Any]:
    """The overview's numbers and their charts (sync: reads the database)."""
    stats = overview_stats()
    latency_top = max((b.p95 or 0 for b in stats.latency_buckets), default=0)
    return {
        **_links(stats, latency_top),
        "stats": stats,
        "rate_minutes": RATE_MINUTES,
        "rate_chart": charts.sparkline(stats.per_minute),
        "p50_chart": charts.sparkline([b.p50 for b in stats.latency_buckets], top=latency_top),
        "p95_chart": charts.sparkline([b.p95 for b in stats.latency_buckets], top=latency_top),
        "agent_shares": charts.shares(stats.agents, AGENT_LABELS),
    }


@viewer_required
def overview(request: HtmxHttpRequest) -> HttpResponse:
    if request.htmx:
        return TemplateResponse(request, "dashboard/overview.html#numbers", numbers_context())
    context = {
        **numbers_context(),
        "messages": traffic_recent(filters=TrafficFilter(), limit=FEED_ROWS),
        "live_page": "overview",
    }
    return TemplateResponse(request, "dashboard/overview.html", context)


@live.ticker("overview")
def overview_numbers() -> str:
    """The numbers, pushed to open overview pages every few seconds (replaces them in place)."""
    return render_to_string("dashboard/overview.html#numbers", {**numbers_context(), "oob": True})
