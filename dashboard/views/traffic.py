"""The live traffic feed."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpResponse
from django.template.response import TemplateResponse

from a2a_core.models import Agent, Decision, TaskState
from a2a_core.schemas.envelopes import KINDS
from a2a_core.selectors.traffic import TrafficFilter, traffic_recent
from dashboard.http import HtmxHttpRequest
from dashboard.roles import viewer_required

FILTER_NAMES = ("agent", "from", "to", "kind", "decision", "state", "text", "since", "until")


@viewer_required
def traffic(request: HtmxHttpRequest) -> HttpResponse:
    filters = TrafficFilter.from_values(request.GET)
    context = {
        "messages": traffic_recent(filters=filters, limit=100),
        "filters": filters,
        "agent_slugs": list(Agent.objects.order_by("slug").values_list("slug", flat=True)[:500]),
        "kinds": KINDS,
        "decisions": Decision.choices,
        "states": TaskState.choices,
        "live_page": "traffic",
        # The socket starts with the page's filters: what arrives live is what a reload shows.
        "live_query": urlencode({k: v for k, v in request.GET.items() if k in FILTER_NAMES and v}),
    }
    template = "dashboard/traffic.html#rows" if request.htmx else "dashboard/traffic.html"
    return TemplateResponse(request, template, context)
