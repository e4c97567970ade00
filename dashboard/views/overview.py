"""The overview: the hub at a glance, its numbers refreshed live, and a compact live feed."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse

from a2a_core.models import AgentStatus, Decision
from a2a_core.selectors.stats import RATE_MINUTES, overview_stats
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


def numbers_context() -> dict[str, Any]:
    """The overview's numbers and their charts (sync: reads the database)."""
    stats = overview_stats()
    latency_top = max((b.p95 or 0 for b in stats.latency_buckets), default=0)
    return {
        "stats": stats,
        "rate_minutes": RATE_MINUTES,
        "rate_chart": charts.sparkline(stats.per_minute),
        "p50_chart": charts.sparkline([b.p50 for b in stats.latency_buckets], top=latency_top),
        "p95_chart": charts.sparkline([b.p95 for b in stats.latency_buckets], top=latency_top),
        "decisions": charts.shares(stats.decisions, DECISION_LABELS),
        "rejections": charts.bars(stats.rejections),
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
