"""Screens not built yet: a page saying so, for every role."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.template.response import TemplateResponse

from dashboard.http import HtmxHttpRequest
from dashboard.roles import viewer_required


@viewer_required
def placeholder(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    return TemplateResponse(request, "dashboard/placeholder.html", {})
