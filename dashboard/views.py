"""Thin htmx views: parse, call a selector or service, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from a2a_core import selectors


@login_required
def traffic(request: HttpRequest) -> HttpResponse:
    return TemplateResponse(request, "dashboard/traffic.html", {})


@login_required
def agents(request: HttpRequest) -> HttpResponse:
    rows = [
        (agent, selectors.effective_status(agent, busy=bool(getattr(agent, "busy", False))))
        for agent in selectors.agent_list()
    ]
    return TemplateResponse(request, "dashboard/agents.html", {"rows": rows})
