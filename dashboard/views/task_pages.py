"""Tasks: the board by state, a task with its history and delegation chain, a conversation."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.template.response import TemplateResponse

from a2a_core.errors import NotFound
from a2a_core.models import Agent
from a2a_core.selectors.edit_diffs import edit_diff
from a2a_core.selectors.task_views import BoardFilter, conversation, task_board, task_detail
from dashboard.chain import chain_graph
from dashboard.http import HtmxHttpRequest
from dashboard.roles import viewer_required


@viewer_required
def task_list(request: HtmxHttpRequest) -> HttpResponse:
    filters = BoardFilter(
        agent=request.GET.get("agent", "")[:64], text=request.GET.get("q", "").strip()[:200]
    )
    context = {
        "board": task_board(filters=filters),
        "filters": filters,
        "agent_slugs": list(Agent.objects.order_by("slug").values_list("slug", flat=True)[:500]),
        "live_page": "tasks",
    }
    # The filter form pushes its URL: going back to it asks for the whole page again.
    partial = request.htmx and not request.htmx.history_restore_request
    template = "dashboard/tasks.html#board" if partial else "dashboard/tasks.html"
    return TemplateResponse(request, template, context)


@viewer_required
def task_page(request: HtmxHttpRequest, task_id: str) -> HttpResponse:
    try:
        detail = task_detail(task_id=task_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    task = detail.task
    for escalation in detail.escalations:
        # A held message edited before approval: the original beside the edit.
        escalation.edit = edit_diff(escalation)  # type: ignore[attr-defined]
    context = {
        "detail": detail,
        "task": task,
        "graph": chain_graph(detail.chain, current=task.pk),
        "live_page": "task",
        # The root: a change anywhere on the chain redraws the graph.
        "live_query": urlencode({"task": task.pk, "root": task.root_id or task.pk}),
    }
    template = "dashboard/task.html#live" if request.htmx else "dashboard/task.html"
    return TemplateResponse(request, template, context)


@viewer_required
def conversation_page(request: HtmxHttpRequest, context_id: str) -> HttpResponse:
    try:
        found = conversation(context_id=context_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    return TemplateResponse(request, "dashboard/conversation.html", {"conversation": found})
