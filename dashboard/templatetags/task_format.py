"""Filters for the dashboard's times: short durations a board card has room for, moments
as people say them."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


def compact(seconds: float) -> str:
    """<1s, 4s, 3m 05s, 2h 10m, 3d 4h: the two largest units, as on a stopwatch."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s" if secs else "<1s"


@register.filter
def since(start: datetime | None, end: datetime | None = None) -> str:
    """How long from `start` to `end` (default: now), compactly; empty without a start."""
    if start is None:
        return ""
    return compact(((end or timezone.now()) - start).total_seconds())


@register.filter
def ago(moment: datetime | None) -> str:
    """When `moment` was, as people say it: "just now" within a minute, else "3 minutes ago"."""
    if moment is None:
        return ""
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment)} ago"


@register.simple_tag
def warn_seconds() -> int:
    """How long before a deadline it is warned about (HUB_NOTIFY_WARN_SECONDS)."""
    return int(settings.HUB_NOTIFY_WARN_SECONDS)


@register.filter
def expiry_warning(deadline: datetime | None) -> str:
    """ "expiring soon" when `deadline` is less than HUB_NOTIFY_WARN_SECONDS away, else empty:
    a mark beside the countdown, never a second reading of the time left."""
    if deadline is None:
        return ""
    left = (deadline - timezone.now()).total_seconds()
    if not 0 < left <= settings.HUB_NOTIFY_WARN_SECONDS:
        return ""
    return "expiring soon"
