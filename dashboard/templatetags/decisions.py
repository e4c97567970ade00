"""Who made a decision, as pages show it next to the decision."""

from __future__ import annotations

from collections.abc import Mapping

from django import template

register = template.Library()


@register.filter
def decider(deciders: Mapping[int, str], pk: int) -> str:
    """The name in `deciders` (message pk -> who decided) for message `pk`, '' if none."""
    return deciders.get(pk, "") if isinstance(deciders, Mapping) else ""
