"""The trace view: a whole delegation (one trace, or a conversation with the hops delegated
from it) as one timeline, live while it runs."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from a2a_core.errors import NotFound
from a2a_core.models import Task
from a2a_core.selectors.spans import span_detail
from a2a_core.selectors.traces import Trace, trace_get, trace_of_context
from dashboard.http import HtmxHttpRequest
from dashboard.roles import viewer_required
from dashboard.waterfall import split_view, waterfall


def _render(request: HtmxHttpRequest, trace: Trace, url: str) -> HttpResponse:
    context = {
        "chart": waterfall(trace, now=timezone.now()),
        "trace": trace,
        "url": url,
        "live_page": "trace",
        # A change anywhere on the chain redraws the trace.
        "live_query": urlencode({"root": trace.root_id, "url": url}),
    }
    template = "dashboard/trace.html#live" if request.htmx else "dashboard/trace.html"
    return TemplateResponse(request, template, context)


@viewer_required
def trace_page(request: HtmxHttpRequest, trace_id: str) -> HttpResponse:
    try:
        trace = trace_get(trace_id=trace_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    return _render(request, trace, request.path)


@viewer_required
def context_trace_page(request: HtmxHttpRequest, context_id: str) -> HttpResponse:
    try:
        trace = trace_of_context(context_id=context_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    return _render(request, trace, request.path)


@viewer_required
def task_trace(request: HtmxHttpRequest, task_id: str) -> HttpResponse:
    """The trace a task belongs to."""
    trace_id = Task.objects.filter(pk=task_id).values_list("trace_id", flat=True).first()
    if not trace_id:
        raise Http404(f"task {task_id} not found")
    return _render(
        request, trace_get(trace_id=trace_id), reverse("dashboard:trace", args=[trace_id])
    )


@viewer_required
def span_panel(request: HtmxHttpRequest, trace_id: str, task_id: str) -> HttpResponse:
    """One span opened: the side panel (htmx), or a page of its own."""
    try:
        span = span_detail(task_id=task_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    if span.task.trace_id != trace_id:
        raise Http404(f"task {task_id} is not in trace {trace_id}")
    template = "dashboard/span.html#panel" if request.htmx else "dashboard/span.html"
    return TemplateResponse(request, template, {"span": span, "split": split_view(span)})
