"""Who is told when an escalation waits: the notification targets, managed by admins (their
digest interval, routing rules, pass-on, and the user an email's links act as)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import Http404, HttpResponse, QueryDict
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from a2a_core.errors import FieldProblem, NotFound, ValidationFailed
from a2a_core.models import Notification, NotificationTarget
from a2a_core.services import notify as service
from dashboard.http import HtmxHttpRequest, actor
from dashboard.roles import admin_required

RULE_FIELDS = ("agents", "pairs", "kinds", "priorities", "skills")


def _whole(text: str, field: str) -> int | None:
    """A whole number from a form field ('' is None); ValidationFailed names the field."""
    text = text.strip()[:12]
    if not text:
        return None
    if not text.isdigit():
        raise ValidationFailed("not a number", [FieldProblem(field, "give a whole number")])
    return int(text)


def _options(posted: QueryDict) -> dict[str, Any]:
    """The service's options from the target form: digest seconds, the rules as
    comma-separated lists, pass-on (a target and minutes), the email's user."""
    rules = {
        name: [v for v in posted.get(name, "")[:5000].split(",") if v.strip()]
        for name in RULE_FIELDS
    }
    minutes = posted.get("pass_after", "").strip()[:12]
    try:
        seconds = max(1, round(float(minutes) * 60)) if minutes else None
    except ValueError:
        raise ValidationFailed(
            "not a number", [FieldProblem("pass_after", "give minutes, e.g. 15 or 0.5")]
        ) from None
    return {
        "digest_seconds": _whole(posted.get("digest", ""), "digest"),
        "rules": rules,
        "pass_to": _whole(posted.get("pass_to", ""), "pass_to"),
        "pass_after_seconds": seconds,
        "user": posted.get("user", "").strip()[:150] or None,
    }


def _page(request: HtmxHttpRequest, **extra: Any) -> HttpResponse:
    context = {
        "targets": list(NotificationTarget.objects.select_related("user", "pass_to")),
        "rule_fields": RULE_FIELDS,
        "default_digest": settings.HUB_NOTIFY_DIGEST_SECONDS,
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
            **_options(posted),
        )
    except ValidationFailed as exc:
        problems = {p.field: p.message for p in exc.problems}
        return _page(request, problems=problems, posted=posted, notice=exc.message, tone="error")
    return _page(request, added=target, notice=f"Added {target.shown_address}.", tone="ok")


@require_POST
@admin_required
def notify_change(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """A target's digest interval, routing rules, pass-on and user, as its form says."""
    try:
        target = service.notify_target_update(
            target_id=pk, actor=actor(request), **_options(request.POST)
        )
    except NotFound:
        raise Http404 from None
    except ValidationFailed as exc:
        problems = {p.field: p.message for p in exc.problems}
        return _page(request, problems=problems, notice=exc.message, tone="error", editing=pk)
    return _page(request, notice=f"Saved how {target.shown_address} is told.", tone="ok")


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
        service.notify_test(target_id=pk)
    except NotFound:
        raise Http404 from None
    return _page(
        request, notice="Test queued: it is sent at once; reload to see how it went.", tone="ok"
    )
