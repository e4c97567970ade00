"""The escalation inbox's dense list line as a template tag (see dashboard/escalation_lines.py)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from dashboard.escalation_lines import escalation_line

register = template.Library()


@register.simple_tag(takes_context=True)
def line(context: Any, card: Any) -> SafeString:
    return escalation_line(
        card,
        me=context.get("me", ""),
        can_decide=bool(context.get("can_decide")),
        claims_hold=bool(context.get("claims_hold")),
        oob=bool(context.get("oob")),
        notice=context.get("notice", "") or "",
        tone=context.get("tone", "") or "",
    )
