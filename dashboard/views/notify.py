"""Who is told when an escalation waits: the notification targets, managed by admins."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from a2a_core.errors import NotFound, ValidationFailed
from a2a_core.models import Notification, NotificationTarget
from a2a_core.services import notify as service
from dashboard.http import HtmxHttpRequest, actor
from dashboard.roles import admin_required


def _page(request: HtmxHttpRequest, **extra: Any) -> HttpResponse:
    context = {
        "targets": list(NotificationTarget.objects.all()),
        "recent": list(Notification.objects.select_related("target").order_by("-pk")[:30]),
        **extra,
    }
    return TemplateResponse(request, "dashboard/notify.html", context)


@admin_required
def notify_targets(request: HtmxHttpRequest) -> HttpResponse:
    return _page(request)


@require_POST
@admin_required
def notify_add(request: HtmxHttpRequest) -> HttpResponse:
    posted = request.POST
    try:
        target = service.notify_target_add(
            kind=posted.get("kind", "")[:16],
            address=posted.get("address", "")[:2001],
            format=posted.get("format", "")[:16],
            actor=actor(request),
        )
    except ValidationFailed as exc:
        problems = {p.field: p.message for p in exc.problems}
        return _page(request, problems=problems, posted=posted, notice=exc.message, tone="error")
    return _page(request, added=target, notice=f"Added {target.shown_address}.", tone="ok")


@require_POST
@admin_required
def notify_remove(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    try:
        target = service.notify_target_remove(target_id=pk, actor=actor(request))
    except NotFound:
        raise Http404 from None
    return _page(request, notice=f"Removed {target.shown_address}.", tone="ok")


@require_POST
@admin_required
def notify_test(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    try:
        service.notify_test(target_id=pk, here=False)
    except NotFound:
        raise Http404 from None
    return _page(
        request, notice="Test queued: it is sent at once; reload to see how it went.", tone="ok"
    )
