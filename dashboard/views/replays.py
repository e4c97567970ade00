"""Replays in the dashboard: make a set from a filtered trace list, a task board or one task,
run it in the background, watch its progress, read the answers side by side, run it again,
export it. Operators make and run sets; everyone with a role reads them."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any, cast
from urllib.parse import urlencode

from django.conf import settings
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from a2a_core.delivery.replay import replay_run
from a2a_core.errors import HubError, NotFound
from a2a_core.logging import get_logger
from a2a_core.models import Agent, ReplaySet, ReplayStatus, Task
from a2a_core.selectors.replay import replay_jsonl, replay_set_get, replay_sets_recent
from a2a_core.selectors.task_views import BoardFilter, task_board
from a2a_core.selectors.trace_list import matching_roots
from a2a_core.services.replay import (
    DEFAULT_CALLER,
    MAX_ITEMS,
    REPLAY_ROLE,
    replay_caller,
    replay_run_begin,
    replay_set_create,
)
from dashboard.http import HtmxHttpRequest
from dashboard.roles import operator_required, viewer_required
from dashboard.views.trace_list import TraceForm

log = get_logger("dashboard.replay")
# The replay form's own fields, beside the filters of the view it was made from.
REPLAY_FIELDS = ("to", "replay_as", "name", "csrfmiddlewaretoken")
# The most tasks a set made from a filtered view takes.
FROM_VIEW = 200


def _chosen(request: HtmxHttpRequest) -> tuple[list[str], str]:
    """The tasks the request names, and what they were chosen from, in words."""
    data = request.POST if request.method == "POST" else request.GET
    if task_ids := data.getlist("task"):
        return task_ids[:MAX_ITEMS], f"task {', '.join(task_ids[:3])}" + (
            "…" if len(task_ids) > 3 else ""
        )
    if data.get("from") == "tasks":
        board = task_board(
            filters=BoardFilter(agent=data.get("agent", "")[:64], text=data.get("q", "")[:200])
        )
        ids = [t.pk for column in board.ended for t in column.tasks]
        query = urlencode({k: data[k] for k in ("agent", "q") if data.get(k)})
        return ids[:FROM_VIEW], f"the ended tasks of /tasks/{'?' + query if query else ''}"
    form = TraceForm({k: v for k, v in data.items() if k not in REPLAY_FIELDS})
    if not form.is_valid():
        return [], ""
    ids = matching_roots(form.trace_filter(), limit=FROM_VIEW)
    query = form.query()
    return ids[:FROM_VIEW], f"the traces of /traces/{'?' + query if query else ''}"


def _choices(request: HtmxHttpRequest) -> dict[str, Any]:
    return {
        "agents": list(Agent.objects.order_by("slug").values_list("slug", flat=True)[:500]),
        "callers": sorted(
            {DEFAULT_CALLER}
            | set(Agent.objects.filter(role=REPLAY_ROLE).values_list("slug", flat=True))
        ),
    }


@operator_required
def replay_new(request: HtmxHttpRequest) -> HttpResponse:
    """What a set from this view would replay, and where to: the form that makes and runs it."""
    task_ids, source = _chosen(request)
    tasks = list(Task.objects.filter(pk__in=task_ids[:10]).select_related("caller", "target"))
    hidden = [(k, v) for k in request.GET for v in request.GET.getlist(k)]
    context = {"count": len(task_ids), "tasks": tasks, "source": source, "hidden": hidden}
    return TemplateResponse(request, "dashboard/replay_new.html", {**context, **_choices(request)})


@operator_required
@require_POST
def replay_create(request: HtmxHttpRequest) -> HttpResponse:
    task_ids, source = _chosen(request)
    target_slug = request.POST.get("to", "")
    target = Agent.objects.filter(slug=target_slug).first() if target_slug else None
    try:
        if target_slug and target is None:
            raise NotFound(f"no agent {target_slug!r} is registered")
        caller = replay_caller(slug=request.POST.get("replay_as") or DEFAULT_CALLER)
        replay_set = replay_set_create(
            task_ids=task_ids,
            caller=caller,
            target=target,
            name=request.POST.get("name", ""),
            source=source,
            actor=request.user if request.user.is_authenticated else None,
        )
    except HubError as exc:
        context = {"error": str(exc), "count": len(task_ids), "tasks": [], "source": source}
        hidden = [(k, v) for k in request.POST for v in request.POST.getlist(k)]
        context["hidden"] = [(k, v) for k, v in hidden if k not in REPLAY_FIELDS]
        return TemplateResponse(
            request, "dashboard/replay_new.html", {**context, **_choices(request)}, status=400
        )
    _start(request, replay_set.pk)
    return redirect("dashboard:replay", set_id=replay_set.pk)


def _start(request: HtmxHttpRequest, set_id: int) -> None:
    """Begin a run of the set (its page shows it running from now on) and run it in the
    background, through this hub's own A2A endpoint. Raises `ValidationFailed` while a run
    of it is under way."""
    hub_url = settings.HUB_PUBLIC_URL or request.build_absolute_uri("/").rstrip("/")
    replay_run_begin(set_id=set_id)

    def run() -> None:
        try:
            asyncio.run(replay_run(set_id, hub_url=hub_url, begun=True))
        except HubError as exc:
            log.warning("replay set %s did not run: %s", set_id, exc)

    threading.Thread(target=run, name=f"replay-{set_id}", daemon=True).start()


@operator_required
@require_POST
def replay_rerun(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    replay_set = ReplaySet.objects.filter(pk=set_id).first()
    if replay_set is None:
        raise Http404("no such replay set")
    if replay_set.status != ReplayStatus.RUNNING:
        with contextlib.suppress(HubError):  # begun meanwhile by someone else: it runs
            _start(request, set_id)
    return redirect("dashboard:replay", set_id=set_id)


@viewer_required
def replay_list(request: HtmxHttpRequest) -> HttpResponse:
    return TemplateResponse(request, "dashboard/replays.html", {"sets": replay_sets_recent()})


@viewer_required
def replay_page(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    try:
        view = replay_set_get(set_id=set_id)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    template = "dashboard/replay.html#live" if request.htmx else "dashboard/replay.html"
    return TemplateResponse(request, template, {"view": view, "set": view.replay_set})


@viewer_required
def replay_export(request: HtmxHttpRequest, set_id: int) -> HttpResponse:
    if not ReplaySet.objects.filter(pk=set_id).exists():
        raise Http404("no such replay set")
    response = StreamingHttpResponse(
        replay_jsonl(set_id=set_id), content_type="application/x-ndjson; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="replay-{set_id}.jsonl"'
    return cast(HttpResponse, response)
