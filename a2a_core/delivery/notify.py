"""Telling people an escalation waits: the sender of queued notifications.

A webhook in Slack format gets `{"text": "..."}` (with Block Kit Approve/Reject buttons for
one held message when Slack actions are on: HUB_SLACK_SIGNING_SECRET; see
a2a_core/services/notify_actions.py); one in JSON format gets the escalation as JSON with
`X-A2A-Signature` (an HMAC of the body keyed by the target's secret, the same scheme as push
notifications: see a2a_core/client/webhooks.py). An email goes through Django's email backend
(SMTP settings from the environment); for an email target that acts as a hub user, one held
message comes with signed single-use Approve/Reject links. Each carries a link to the item.

Digests: a target gets at most one message per its digest interval (`digest_seconds`, else
HUB_NOTIFY_DIGEST_SECONDS). The first item goes at once; whatever is queued meanwhile stays
stored (pending Notification rows, so a restart loses nothing) and goes as one digest when the
interval is over: counts by event, pair and kind, identical items folded, each group linked to
the inbox filtered to it. A test notification is never held back nor folded.

What an agent wrote (its question or held message, its name, the priority it asked for)
reaches each format as text, never as markup: on one line, without control or invisible
characters; in Slack's mrkdwn, `&`, `<` and `>` escaped (so no `<!channel>`, `<@U...>`,
`<#C...>` or `<url|disguised link>`) and the words in a code span (so no formatting and no
bare URL made a link): the only links are the hub's own. An email's subject is one line.

Each target is sent to on its own: its claimed notifications in an asyncio task of its own,
each bounded by HUB_NOTIFY_TIMEOUT, and nothing else waits for that task, so a slow or
silent target delays nobody else's notifications.

A failed attempt is retried after HUB_NOTIFY_RETRY_SECONDS, doubling each time, up to
HUB_NOTIFY_MAX_ATTEMPTS; the target keeps its last error (shown on its page) and counts what
was given up on. Webhook URLs and secrets never reach a log or an error message: errors name
the status or the kind of failure only. A webhook's host is checked before each POST like a
push notification's (see `a2a_core.delivery.ssrf`), against its own allow-list,
HUB_NOTIFY_ALLOWED_HOSTS: a loopback or private address is refused unless listed there, and
the refusal is the target's last error.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
from django.conf import settings
from django.core.mail import EmailMessage
from django.db import connection, transaction
from django.db.models import Q
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from a2a_core.asyncdb import db
from a2a_core.backoff import backoff
from a2a_core.client.webhooks import HEADER, sign
from a2a_core.delivery.ssrf import NOTIFY, UnsafeTarget, resolve
from a2a_core.logging import get_logger
from a2a_core.models import (
    Escalation,
    EscalationKind,
    EscalationStatus,
    Notification,
    NotificationState,
    NotificationTarget,
    NotifyEvent,
    TargetKind,
    WebhookFormat,
)

log = get_logger("notify")
# Targets claimed in one pass.
BATCH = 50
# Most items one digest carries; more wait for the next one.
DIGEST_MOST = 5000
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


def _one_line(text: str, limit: int) -> str:
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
class _About:
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


def _about(note: Notification) -> _About:
    """What a notification says. Every part that came from an agent is made plain here,
    and escaped for Slack; only the hub's name, its link and the event are the hub's."""
    escalation: Escalation | None = note.escalation
    link = escalation_link(note.escalation_id)
    hub = _one_line(settings.HUB_NAME, 100)
    if escalation is None:
        return _About(
            event="test",
            title=f"{hub}: test notification",
            text=f"{hub} can reach you here. Escalations: {link}",
            slack=f"{_mrkdwn(hub)} can reach you here. <{link}|Escalations>",
            link=link,
        )
    what = "held message" if escalation.kind == EscalationKind.APPROVAL else "question"
    said = _one_line(escalation.question or "", 300)
    agent = _one_line(escalation.agent.slug, 100)
    priority = _one_line(escalation.priority, 20)
    phrase = NotifyEvent(note.event).label
    deadline = escalation.deadline.strftime("%Y-%m-%d %H:%M UTC") if escalation.deadline else ""
    when = f" (deadline {deadline})" if deadline else ""
    title = f"{hub}: {priority} {what} from {agent} {phrase}"
    slack_title = f"{_mrkdwn(hub)}: {_mrkdwn(priority)} {what} from {_mrkdwn(agent)} {phrase}"
    return _About(
        event=f"escalation.{note.event}",
        title=title,
        text=f"{title}: {said}{when} {link}",
        slack=f"{slack_title}: {_quoted(said)}{when} <{_mrkdwn(link)}|open it>",
        link=link,
        data={"escalation": _escalation_data(escalation)},
        escalation_id=escalation.pk,
        can_act=escalation.kind == EscalationKind.APPROVAL
        and escalation.status == EscalationStatus.PENDING
        and note.event != NotifyEvent.EXPIRED,
    )


def _escalation_data(escalation: Escalation) -> dict[str, Any]:
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
class _Group:
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


def _digest(notes: list[Notification]) -> _About:
    """One message about many items: counts by event, pair and kind; identical items (the
    same words, or the inbox's fold) folded into one line with their count."""
    groups: dict[tuple[str, str, str, str], _Group] = {}
    for note in notes:
        escalation = note.escalation
        if escalation is None:
            continue
        task = escalation.task
        caller = task.caller.slug if task.caller is not None else ""
        key = (note.event, caller, task.target.slug, escalation.kind)
        group = groups.setdefault(key, _Group(*key))
        group.ids.append(escalation.pk)
        group.decided += escalation.status != EscalationStatus.PENDING
        group.folds[_one_line(escalation.question or "", 200)] += 1
    ordered = sorted(groups.values(), key=lambda g: (-len(g.ids), g.event, g.caller, g.target))
    total = sum(len(g.ids) for g in ordered)
    hub = _one_line(settings.HUB_NAME, 100)
    title = f"{hub}: {total} escalation notices (digest)"
    link = ordered[0].link if len(ordered) == 1 else inbox_link()
    lines, slack_lines = [], []
    for group in ordered[:GROUPS_SHOWN]:
        caller, target = _one_line(group.caller, 100), _one_line(group.target, 100)
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
    return _About(
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


@dataclass
class Batch:
    """What one message to one target carries: a test, one item, or a digest of many."""

    target: NotificationTarget
    notes: list[Notification]


def _interval(target: NotificationTarget) -> int:
    if target.digest_seconds is not None:
        return target.digest_seconds
    return settings.HUB_NOTIFY_DIGEST_SECONDS


def notify_claim(limit: int = BATCH, exclude_targets: tuple[int, ...] = ()) -> list[Batch]:
    """The messages due for this process to send, none to `exclude_targets`. Each target's
    tests are due at once, one message each; its other items when its interval since the
    last message is over, all in one message (the claim moves the target's next send an
    interval ahead, and the items' next attempt a lease ahead, so no other process sends
    them too)."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.HUB_NOTIFY_TIMEOUT * 3)
    due = Notification.objects.filter(state=NotificationState.PENDING, next_attempt_at__lte=now)
    batches: list[Batch] = []
    with transaction.atomic():
        free = Q(next_send_at__isnull=True) | Q(next_send_at__lte=now)
        tests = due.filter(event=NotifyEvent.TEST).values("target_id")
        targets = (
            NotificationTarget.objects.filter(
                Q(pk__in=due.exclude(event=NotifyEvent.TEST).values("target_id")) & free
                | Q(pk__in=tests)
            )
            .exclude(pk__in=exclude_targets)
            .order_by("pk")
        )
        if connection.features.has_select_for_update_skip_locked:
            targets = targets.select_for_update(skip_locked=True)
        for target in list(targets[:limit]):
            its = due.filter(target=target)
            pks = list(its.filter(event=NotifyEvent.TEST).values_list("pk", flat=True)[:10])
            single = bool(pks)
            if not pks and (target.next_send_at is None or target.next_send_at <= now):
                pks = list(its.order_by("pk").values_list("pk", flat=True)[:DIGEST_MOST])
                target.next_send_at = now + timedelta(seconds=_interval(target))
                target.save(update_fields=["next_send_at"])
            Notification.objects.filter(pk__in=pks).update(next_attempt_at=lease)
            notes = list(
                Notification.objects.select_related(
                    "escalation__agent", "escalation__task__caller", "escalation__task__target"
                )
                .filter(pk__in=pks)
                .order_by("pk")
            )
            for note in notes:
                note.target = target
            groups = [[note] for note in notes] if single else [notes] if notes else []
            batches += [Batch(target, group) for group in groups]
    return batches


def _done(batch: Batch, error: str) -> None:
    """Record an attempt of a message: its items sent (no `error`), retried later, or given
    up on. A failed message's retry is not held back by the digest interval."""
    now = timezone.now()
    target = NotificationTarget.objects.get(pk=batch.target.pk)
    fields: list[str] = []
    retry: datetime | None = None
    for note in batch.notes:
        note.attempts += 1
        if not error:
            note.state, note.sent_at, note.last_error = NotificationState.SENT, now, ""
        elif note.event == NotifyEvent.TEST:  # tried once: whoever asked is told how it went
            note.state, note.last_error = NotificationState.FAILED, error[:500]
        elif note.attempts >= settings.HUB_NOTIFY_MAX_ATTEMPTS:
            note.state, note.last_error = NotificationState.FAILED, error[:500]
            target.failures += 1
        else:
            note.last_error = error[:500]
            wait = backoff(note.attempts, settings.HUB_NOTIFY_RETRY_SECONDS)
            note.next_attempt_at = now + timedelta(seconds=wait)
            retry = note.next_attempt_at
    if not error:
        target.last_ok_at = now
        fields.append("last_ok_at")
    else:
        target.last_error, target.last_error_at = error[:500], now
        fields += ["last_error", "last_error_at", "failures"]
        if retry is not None and any(n.event != NotifyEvent.TEST for n in batch.notes):
            target.next_send_at = retry
            fields.append("next_send_at")
    with transaction.atomic():
        target.save(update_fields=fields)
        Notification.objects.bulk_update(
            batch.notes, ["attempts", "state", "sent_at", "last_error", "next_attempt_at"]
        )


def _about_batch(batch: Batch) -> _About:
    if len(batch.notes) == 1:
        return _about(batch.notes[0])
    return _digest(batch.notes)


def _action_tokens(target: NotificationTarget, about: _About) -> dict[str, str]:
    """An email's signed Approve/Reject links, for its user (none without one)."""
    from a2a_core.services.notify_actions import action_link_token

    if not about.can_act or about.escalation_id is None or target.user_id is None:
        return {}
    return {
        action: action_link(
            action_link_token(
                escalation_id=about.escalation_id, action=action, user_id=target.user_id
            )
        )
        for action in ("approve", "reject")
    }


def _send_email(target: NotificationTarget, about: _About) -> None:
    """A plain-text email; its subject one line (no header can be added through it)."""
    body = f"{about.text}\n\nOpen it: {about.link}\n"
    links = _action_tokens(target, about)
    if links:
        body += (
            f"\nApprove: {links['approve']}\nReject: {links['reject']}\n"
            "(each link works once, for you only, after you log in; it asks you to confirm)\n"
        )
    EmailMessage(
        subject=_one_line(about.title, 200),
        body=body,
        to=[target.address],
    ).send(using="default")


def _slack_blocks(about: _About) -> list[dict[str, Any]]:
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


def _webhook_request(target: NotificationTarget, about: _About) -> tuple[bytes, dict[str, str]]:
    if target.format == WebhookFormat.JSON:
        data: dict[str, Any] = {"event": about.event, "text": about.text, "link": about.link}
        data.update(about.data)
        raw = json.dumps(data, ensure_ascii=False).encode()
        return raw, {"Content-Type": "application/json", HEADER: sign(raw, target.secret)}
    slack: dict[str, Any] = {"text": about.slack}
    if about.can_act and settings.HUB_SLACK_SIGNING_SECRET:
        slack["blocks"] = _slack_blocks(about)
    raw = json.dumps(slack, ensure_ascii=False).encode()
    return raw, {"Content-Type": "application/json"}


async def _pinned(
    address: str, headers: dict[str, str]
) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
    """Where to POST for webhook `address`: its host resolved and checked now, the URL aimed at
    a checked address (so DNS cannot change in between), with the Host header and TLS name
    of the original."""
    addresses = await resolve(address, wait_seconds=settings.HUB_NOTIFY_TIMEOUT, setting=NOTIFY)
    url = httpx.URL(address)
    headers = {**headers, "Host": url.netloc.decode("ascii")}
    extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
    return url.copy_with(host=addresses[0]), headers, extensions


def _answered(response: httpx.Response) -> None:
    if not 200 <= response.status_code < 300:
        raise _Refused(f"HTTP {response.status_code}")


def _error_of(exc: Exception) -> str:
    """What went wrong, in words that never carry the URL (nor a secret in it)."""
    if isinstance(exc, _Refused | UnsafeTarget):  # neither names more than the host
        return str(exc)
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return f"timed out ({settings.HUB_NOTIFY_TIMEOUT:g}s)"
    if isinstance(exc, httpx.HTTPError):
        return f"could not connect ({type(exc).__name__})"
    if isinstance(exc, OSError):  # SMTP: refused, unreachable, TLS
        return f"mail server: {type(exc).__name__}: {exc.strerror or exc}"[:300]
    return type(exc).__name__  # smtplib's own errors, a refused address...


def _log(target: NotificationTarget, attempt: int, error: str) -> None:
    log.info(
        "notification not delivered",
        extra={"notify_target": target.pk, "attempt": attempt, "error": error},
    )


class Notifier:
    """Sends what `notify_claim` hands it, a task per target; one HTTP client for the
    process."""

    def __init__(self) -> None:
        self.http = httpx.AsyncClient(timeout=settings.HUB_NOTIFY_TIMEOUT, follow_redirects=False)
        self.sending: dict[int, asyncio.Task[None]] = {}

    async def close(self) -> None:
        for task in list(self.sending.values()):
            task.cancel()
        await asyncio.gather(*self.sending.values(), return_exceptions=True)
        await self.http.aclose()

    async def run_once(self) -> int:
        """Claim the due messages of every target not being sent to now and start sending
        them, a task per target; returns how many were claimed, without waiting for any to
        be sent. A busy target's later messages wait for its task, nobody else's do."""
        batches = await db(notify_claim, exclude_targets=tuple(self.sending))
        by_target: dict[int, list[Batch]] = {}
        for batch in batches:
            by_target.setdefault(batch.target.pk, []).append(batch)
        for target_id, its in by_target.items():
            task = asyncio.get_running_loop().create_task(
                self._send_all(its), name=f"notify-target-{target_id}"
            )
            self.sending[target_id] = task
            task.add_done_callback(functools.partial(self._finished, target_id))
        return len(batches)

    def _finished(self, target_id: int, _: asyncio.Task[None]) -> None:
        self.sending.pop(target_id, None)

    async def _send_all(self, batches: list[Batch]) -> None:
        """Send one target's messages; one whose outcome could not be recorded (the
        database failed) is tried again when its claim runs out."""
        sent = await asyncio.gather(*(self._send(b) for b in batches), return_exceptions=True)
        failed = [outcome for outcome in sent if isinstance(outcome, Exception)]
        if failed:
            log.warning(
                "notification outcome not recorded",
                extra={"notify_target": batches[0].target.pk, "error": repr(failed[0])[:300]},
            )

    async def _send(self, batch: Batch) -> None:
        target = batch.target
        error = ""
        try:
            async with asyncio.timeout(settings.HUB_NOTIFY_TIMEOUT):
                about = await db(_about_batch, batch)
                if target.kind == TargetKind.EMAIL:
                    await asyncio.to_thread(_send_email, target, about)
                else:
                    body, headers = _webhook_request(target, about)
                    url, headers, extensions = await _pinned(target.address, headers)
                    response = await self.http.post(
                        url, content=body, headers=headers, extensions=extensions
                    )
                    _answered(response)
        except Exception as exc:
            error = _error_of(exc)
            _log(target, batch.notes[0].attempts + 1, error)
        await db(_done, batch, error)


class _Refused(Exception):
    """The receiver answered, but not with a 2xx."""
