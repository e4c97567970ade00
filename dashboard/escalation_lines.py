"""The dense list's lines: one escalation a line, rendered in Python.

A page of the dense list is 100 lines. Through the template language each line cost about
2 ms (40 variable lookups, two `url` tags, three date filters); `format_html` does the same
line in a tenth of that: bench/escalation_page.py, 10,000 pending on SQLite, the first page's
render went from 250 to 60 ms on a loaded machine (2026-11-29). The cards stay templates.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from a2a_core.models import EscalationKind
from a2a_core.selectors.escalations import EscalationCard
from dashboard.templatetags.task_format import compact, expiry_warning


def _page_url(pk: int) -> str:
    return reverse("dashboard:escalation", args=[pk])


def escalation_line(
    card: EscalationCard,
    *,
    me: str,
    can_decide: bool,
    claims_hold: bool,
    oob: bool = False,
    notice: str = "",
    tone: str = "",
) -> SafeString:
    """One line: select box, priority, its page's link, who asks whom, what it says, who is on
    it, the deadline (or the decision), and Approve for a held message one may decide."""
    e = card.escalation
    page = _page_url(e.pk)
    classes = f"escalation line {e.kind} {e.status}"
    if e.claimed_by_name:
        classes += " claimed"
    deadline = e.deadline or e.task.deadline
    warning = expiry_warning(deadline) if e.is_open else ""
    if warning:
        classes += " expiring"
    pick = (
        format_html(
            '<input type="checkbox" class="pick" form="bulk" name="ids" value="{}" aria-label="#{}">',
            e.pk,
            e.pk,
        )
        if e.is_open and can_decide
        else ""
    )
    if e.kind == EscalationKind.APPROVAL:
        who = format_html("{} → {}", e.agent.slug, e.task.target.slug)
        said = card.message_text
    else:
        who = format_html('{} <span class="muted">asks</span>', e.agent.slug)
        said = e.question
    claim = ""
    if e.claimed_by_name:
        claim = format_html(
            '<span class="badge claimed-by">{}</span>',
            "you" if e.claimed_by_name == me else e.claimed_by_name,
        )
    if not e.is_open:
        when = format_html(
            '<span class="badge {}">{}</span> <span class="small">{}</span>',
            e.status,
            e.status,
            e.decider,
        )
    elif deadline is None:
        when = mark_safe('<span class="small muted">no deadline</span>')
    else:
        left = (deadline - timezone.now()).total_seconds()
        # The one reading of the deadline (hub.js counts it down); its outcome in the title.
        outcome = f"{e.timeout_outcome}s" if e.kind == EscalationKind.APPROVAL else "times out"
        when = format_html(
            '<span class="deadline{}" data-deadline="{}" title="{} at {}">{}</span>',
            " soon" if warning else "",
            deadline.isoformat(timespec="seconds"),
            outcome,
            deadline.strftime("%Y-%m-%d %H:%M:%S UTC"),
            f"in {compact(left)}" if left > 0 else "overdue",
        )
    act: Any = ""
    if e.is_open and can_decide and e.kind == EscalationKind.APPROVAL:
        if claims_hold and e.claimed_by_name and e.claimed_by_name != me:
            act = mark_safe(
                '<span class="small muted" title="claimed: take it over on its page">held</span>'
            )
        else:
            # escalations.js posts it to the line's page + approve/ (a line's bytes count:
            # 100 lines a page, under 100 KB).
            act = mark_safe('<button type="button" class="act-approve">Approve</button>')
    if notice:
        act = format_html(
            '{} <span class="notice {} small" role="status">{}</span>', act, tone, notice
        )
    return format_html(
        '<tr id="escalation-{}" class="{}" data-pk="{}"{}><td>{}</td>'
        '<td><span class="badge priority-{}">{}</span></td>'
        '<td><a class="open" href="{}">#{}</a></td><td class="who">{}</td>'
        '<td class="line-text">{}</td><td class="claim">{}</td>'
        '<td class="escalation-when">{}</td><td>{}</td></tr>',
        e.pk,
        classes,
        e.pk,
        mark_safe(' hx-swap-oob="true"') if oob else "",
        pick,
        e.priority,
        e.priority,
        page,
        e.pk,
        who,
        Truncator(said or "").chars(110),
        claim,
        when,
        act,
    )
