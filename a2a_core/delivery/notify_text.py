"""What a notification says, in each format: one item or a digest, plain for email and JSON,
mrkdwn for Slack, with the hub's links.

What an agent wrote reaches each format as text, never as markup (`one_line`, and for Slack
`quoted`): the only links are the hub's own. The sender is a2a_core/delivery/notify.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.urls import NoReverseMatch, reverse

from a2a_core.models import (
    Escalation,
    EscalationKind,
    EscalationStatus,
    Notification,
    NotifyEvent,
)

# A digest shows this many groups, and this many folds in each; counts cover them all.
GROUPS_SHOWN = 20
FOLDS_SHOWN = 3


def escalation_link(escalation_id: int | None) -> str:
    """The page of one escalation (the inbox when there is none)."""
    if not escalation_id:
        return f"{settings.HUB_DASHBOARD_URL}/escalations/"
    try:
        path = reverse("dashboard:escalation", args=[escalation_id])
    except NoReverseMatch:
        path = f"/escalations/{escalation_id}/"
    return f"{settings.HUB_DASHBOARD_URL}{path}"


def inbox_link(**filters: str) -> str:
    """The inbox filtered as `filters` say (its URL parameters: pair, kind...)."""
    query = urlencode({k: v for k, v in filters.items() if v})
    return f"{settings.HUB_DASHBOARD_URL}/escalations/" + (f"?{query}" if query else "")


def action_link(token: str) -> str:
    try:
        path = reverse("dashboard:notify_act", args=[token])
    except NoReverseMatch:  # the dashboard is not mounted (a bare API process)
        path = f"/notify/act/{token}/"
    return f"{settings.HUB_DASHBOARD_URL}{path}"


def one_line(text: str, limit: int) -> str:
    """`text` as plain words on one line: control, invisible and direction-changing
    characters (what `str.isprintable` refuses) and runs of spaces become one space."""
    printable = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(printable.split())[:limit]


def _mrkdwn(text: str) -> str:
    """Text for Slack's mrkdwn: its three control characters escaped, as Slack asks."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _quoted(text: str) -> str:
    """An agent's words for Slack: escaped, in a code span (no formatting, no autolink); a
    backtick would end the span, so it becomes an apostrophe."""
    return f"`{_mrkdwn(text.replace('`', "'"))}`" if text else ""


@dataclass(frozen=True)
class About:
    """What a notification says, in each format: `title` and `text` plain (email, JSON),
    `slack` in mrkdwn; `data` the JSON format's own fields; `actions` the Slack buttons and
    email links of one held message."""

    event: str
    title: str
    text: str
    slack: str
    link: str
    data: dict[str, Any] = field(default_factory=dict)
    escalation_id: int | None = None
    can_act: bool = False


def about_note(note: Notification) -> About:
    """What a notification says. Every part that came from an agent is made plain here,
    and escaped for Slack; only the hub's name, its link and the event are the hub's."""
    escalation: Escalation | None = note.escalation
    link = escalation_link(note.escalation_id)
    hub = one_line(settings.HUB_NAME, 100)
    if escalation is None:
        return About(
            event="test",
            title=f"{hub}: test notification",
            text=f"{hub} can reach you here. Escalations: {link}",
            slack=f"{_mrkdwn(hub)} can reach you here. <{link}|Escalations>",
            link=link,
        )
    what = "held message" if escalation.kind == EscalationKind.APPROVAL else "question"
    said = one_line(escalation.question or "", 300)
    agent = one_line(escalation.agent.slug, 100)
    priority = one_line(escalation.priority, 20)
    phrase = NotifyEvent(note.event).label
    deadline = escalation.deadline.strftime("%Y-%m-%d %H:%M UTC") if escalation.deadline else ""
    when = f" (deadline {deadline})" if deadline else ""
    title = f"{hub}: {priority} {what} from {agent} {phrase}"
    slack_title = f"{_mrkdwn(hub)}: {_mrkdwn(priority)} {what} from {_mrkdwn(agent)} {phrase}"
    return About(
        event=f"escalation.{note.event}",
        title=title,
        text=f"{title}: {said}{when} {link}",
        slack=f"{slack_title}: {_quoted(said)}{when} <{_mrkdwn(link)}|open it>",
        link=link,
        data={"escalation": escalation_data(escalation)},
        escalation_id=escalation.pk,
        can_act=escalation.kind == EscalationKind.APPROVAL
        and escalation.status == EscalationStatus.PENDING
        and note.event != NotifyEvent.EXPIRED,
    )


def escalation_data(escalation: Escalation) -> dict[str, Any]:
    return {
        "id": escalation.pk,
        "kind": escalation.kind,
        "priority": escalation.priority,
        "agent": escalation.agent.slug,
        "taskId": escalation.task_id,
        "question": escalation.question,
        "reason": escalation.reason,
        "status": escalation.status,
        "deadline": escalation.deadline.isoformat() if escalation.deadline else None,
        "link": escalation_link(escalation.pk),
    }


@dataclass
class Group:
    """Items of one event, pair and kind in a digest."""

    event: str
    caller: str
    target: str
    kind: str
    ids: list[int] = field(default_factory=list)
    decided: int = 0
    folds: Counter[str] = field(default_factory=Counter)

    @property
    def link(self) -> str:
        if len(self.ids) == 1:
            return escalation_link(self.ids[0])
        return inbox_link(pair=f"{self.caller}:{self.target}", kind=self.kind)

    @property
    def noun(self) -> str:
        one = "held message" if self.kind == EscalationKind.APPROVAL else "question"
        return one if len(self.ids) == 1 else f"{one}s"


def digest_of(notes: list[Notification]) -> About:
    """One message about many items: counts by event, pair and kind; identical items (the
    same words, or the inbox's fold) folded into one line with their count."""
    groups: dict[tuple[str, str, str, str], Group] = {}
    for note in notes:
        escalation = note.escalation
        if escalation is None:
            continue
        task = escalation.task
        caller = task.caller.slug if task.caller is not None else ""
        key = (note.event, caller, task.target.slug, escalation.kind)
        group = groups.setdefault(key, Group(*key))
        group.ids.append(escalation.pk)
        group.decided += escalation.status != EscalationStatus.PENDING
        group.folds[one_line(escalation.question or "", 200)] += 1
    ordered = sorted(groups.values(), key=lambda g: (-len(g.ids), g.event, g.caller, g.target))
    total = sum(len(g.ids) for g in ordered)
    hub = one_line(settings.HUB_NAME, 100)
    title = f"{hub}: {total} escalation notices (digest)"
    link = ordered[0].link if len(ordered) == 1 else inbox_link()
    lines, slack_lines = [], []
    for group in ordered[:GROUPS_SHOWN]:
        caller, target = one_line(group.caller, 100), one_line(group.target, 100)
        phrase = NotifyEvent(group.event).label
        decided = f", {group.decided} decided since" if group.decided else ""
        head = f"{len(group.ids)} {group.noun} {caller} -> {target} {phrase}{decided}"
        folds = group.folds.most_common(FOLDS_SHOWN)
        rest = len(group.folds) - len(folds)
        more = f"; {rest} other different" if rest > 0 else ""
        plain = "; ".join(f"{n} x {text}" for text, n in folds)
        slack = "; ".join(f"{n} x {_quoted(text)}" for text, n in folds)
        lines.append(f"- {head}: {plain}{more}\n  {group.link}")
        slack_head = (
            f"{len(group.ids)} {group.noun} {_mrkdwn(caller)} → {_mrkdwn(target)} {phrase}{decided}"
        )
        slack_lines.append(f"• {slack_head}: {slack}{more} <{_mrkdwn(group.link)}|open them>")
    if len(ordered) > GROUPS_SHOWN:
        hidden = sum(len(g.ids) for g in ordered[GROUPS_SHOWN:])
        lines.append(f"- and {hidden} more in {len(ordered) - GROUPS_SHOWN} other groups")
        slack_lines.append(f"• and {hidden} more in {len(ordered) - GROUPS_SHOWN} other groups")
    text = f"{title}\n" + "\n".join(lines) + f"\nThe inbox: {inbox_link()}"
    slack = f"{_mrkdwn(title)}\n" + "\n".join(slack_lines)
    if len(ordered) > 1:
        slack += f"\n<{_mrkdwn(inbox_link())}|Open the inbox>"
    return About(
        event="escalation.digest",
        title=title,
        text=text,
        slack=slack,
        link=link,
        data={
            "count": total,
            "groups": [
                {
                    "event": g.event,
                    "caller": g.caller,
                    "target": g.target,
                    "kind": g.kind,
                    "count": len(g.ids),
                    "decided": g.decided,
                    "link": g.link,
                    "folds": [{"count": n, "text": t} for t, n in g.folds.most_common()],
                    "escalations": g.ids,
                }
                for g in ordered
            ],
        },
    )


def slack_blocks(about: About) -> list[dict[str, Any]]:
    """Block Kit for one held message: its text, and Approve/Reject buttons whose clicks
    come back to the hub's Slack callback (value: the escalation's id)."""
    section = {"type": "section", "text": {"type": "mrkdwn", "text": about.slack[:3000]}}
    buttons = [
        {
            "type": "button",
            "action_id": action,
            "text": {"type": "plain_text", "text": action.capitalize()},
            "style": style,
            "value": str(about.escalation_id),
        }
        for action, style in (("approve", "primary"), ("reject", "danger"))
    ]
    return [section, {"type": "actions", "elements": buttons}]
