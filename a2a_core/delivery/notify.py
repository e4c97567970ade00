"""Telling people an escalation waits: the sender of queued notifications.

A webhook in Slack format gets `{"text": "..."}`; one in JSON format gets the escalation as
JSON with `X-A2A-Signature` (an HMAC of the body keyed by the target's secret, the same scheme
as push notifications: see a2a_core/client/webhooks.py). An email goes through Django's email
backend (SMTP settings from the environment). Each carries a link to the escalation.

What an agent wrote (its question or held message, its name, the priority it asked for)
reaches each format as text, never as markup: on one line, without control or invisible
characters; in Slack's mrkdwn, `&`, `<` and `>` escaped (so no `<!channel>`, `<@U...>`,
`<#C...>` or `<url|disguised link>`) and the words in a code span (so no formatting and no
bare URL made a link): the only link is the hub's own. An email's subject is one line.

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
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import EmailMessage
from django.db import connection, transaction
from django.utils import timezone

from a2a_core.asyncdb import db
from a2a_core.backoff import backoff
from a2a_core.client.webhooks import HEADER, sign
from a2a_core.delivery.ssrf import NOTIFY, UnsafeTarget, resolve
from a2a_core.logging import get_logger
from a2a_core.models import (
    Escalation,
    EscalationKind,
    Notification,
    NotificationState,
    NotificationTarget,
    NotifyEvent,
    TargetKind,
    WebhookFormat,
)

log = get_logger("notify")
BATCH = 50


def escalation_link(escalation_id: int | None) -> str:
    base = f"{settings.HUB_DASHBOARD_URL}/escalations/"
    return f"{base}#escalation-{escalation_id}" if escalation_id else base


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
    `slack` in mrkdwn; `escalation` the JSON format's data."""

    event: str
    title: str
    text: str
    slack: str
    link: str
    escalation: dict[str, Any] | None = None


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
        slack=f"{slack_title}: {_quoted(said)}{when} <{link}|open it>",
        link=link,
        escalation={
            "id": escalation.pk,
            "kind": escalation.kind,
            "priority": escalation.priority,
            "agent": escalation.agent.slug,
            "taskId": escalation.task_id,
            "question": escalation.question,
            "reason": escalation.reason,
            "status": escalation.status,
            "deadline": escalation.deadline.isoformat() if escalation.deadline else None,
        },
    )


def notify_claim(limit: int = BATCH, exclude_targets: tuple[int, ...] = ()) -> list[Notification]:
    """Due notifications for this process to send, none of `exclude_targets` (each by one
    process: the claim moves its next attempt a lease ahead)."""
    now = timezone.now()
    with transaction.atomic():
        due = (
            Notification.objects.filter(state=NotificationState.PENDING, next_attempt_at__lte=now)
            .exclude(target_id__in=exclude_targets)
            .order_by("next_attempt_at", "pk")
        )
        if connection.features.has_select_for_update_skip_locked:
            due = due.select_for_update(skip_locked=True)
        pks = list(due.values_list("pk", flat=True)[:limit])
        lease = now + timedelta(seconds=settings.HUB_NOTIFY_TIMEOUT * 3)
        Notification.objects.filter(pk__in=pks).update(next_attempt_at=lease)
    return list(
        Notification.objects.select_related("target", "escalation__agent").filter(pk__in=pks)
    )


def _done(note: Notification, error: str) -> None:
    """Record an attempt: sent (no `error`), retried later, or given up on."""
    now = timezone.now()
    target: NotificationTarget = note.target
    note.attempts += 1
    if not error:
        note.state, note.sent_at, note.last_error = NotificationState.SENT, now, ""
        target.last_ok_at = now
        target.save(update_fields=["last_ok_at"])
    else:
        note.last_error = error[:500]
        target.last_error, target.last_error_at = error[:500], now
        fields = ["last_error", "last_error_at"]
        if note.attempts >= settings.HUB_NOTIFY_MAX_ATTEMPTS:
            note.state = NotificationState.FAILED
            target.failures += 1
            fields.append("failures")
        else:
            wait = backoff(note.attempts, settings.HUB_NOTIFY_RETRY_SECONDS)
            note.next_attempt_at = now + timedelta(seconds=wait)
        target.save(update_fields=fields)
    note.save(update_fields=["attempts", "state", "sent_at", "last_error", "next_attempt_at"])


def _send_email(target: NotificationTarget, about: _About) -> None:
    """A plain-text email; its subject one line (no header can be added through it)."""
    EmailMessage(
        subject=_one_line(about.title, 200),
        body=f"{about.text}\n\nOpen it: {about.link}\n",
        to=[target.address],
    ).send(using="default")


def _webhook_request(target: NotificationTarget, about: _About) -> tuple[bytes, dict[str, str]]:
    if target.format == WebhookFormat.JSON:
        data: dict[str, Any] = {"event": about.event, "text": about.text, "link": about.link}
        if about.escalation is not None:
            data["escalation"] = about.escalation
        raw = json.dumps(data, ensure_ascii=False).encode()
        return raw, {"Content-Type": "application/json", HEADER: sign(raw, target.secret)}
    raw = json.dumps({"text": about.slack}, ensure_ascii=False).encode()
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
        """Claim the due notifications of every target not being sent to now and start
        sending them, a task per target; returns how many were claimed, without waiting for
        any to be sent. A busy target's later notifications wait for its task, nobody
        else's do."""
        notes = await db(notify_claim, exclude_targets=tuple(self.sending))
        by_target: dict[int, list[Notification]] = {}
        for note in notes:
            by_target.setdefault(note.target_id, []).append(note)
        for target_id, its in by_target.items():
            task = asyncio.get_running_loop().create_task(
                self._send_all(its), name=f"notify-target-{target_id}"
            )
            self.sending[target_id] = task
            task.add_done_callback(functools.partial(self._finished, target_id))
        return len(notes)

    def _finished(self, target_id: int, _: asyncio.Task[None]) -> None:
        self.sending.pop(target_id, None)

    async def _send_all(self, notes: list[Notification]) -> None:
        """Send one target's notifications; one whose outcome could not be recorded (the
        database failed) is tried again when its claim runs out."""
        sent = await asyncio.gather(*(self._send(note) for note in notes), return_exceptions=True)
        failed = [outcome for outcome in sent if isinstance(outcome, Exception)]
        if failed:
            log.warning(
                "notification outcome not recorded",
                extra={"notify_target": notes[0].target_id, "error": repr(failed[0])[:300]},
            )

    async def _send(self, note: Notification) -> None:
        target = note.target
        error = ""
        try:
            async with asyncio.timeout(settings.HUB_NOTIFY_TIMEOUT):
                about = _about(note)
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
            _log(target, note.attempts + 1, error)
        await db(_done, note, error)


def notify_send_now(pk: int) -> Notification:
    """Send one notification at once from this thread, whatever its schedule (the CLI's
    `notify test`); returns it as it then is."""
    note = Notification.objects.select_related("target", "escalation__agent").get(pk=pk)
    target = note.target
    about = _about(note)
    error = ""
    try:
        if target.kind == TargetKind.EMAIL:
            _send_email(target, about)
        else:
            body, headers = _webhook_request(target, about)
            url, headers, extensions = asyncio.run(_pinned(target.address, headers))
            with httpx.Client(timeout=settings.HUB_NOTIFY_TIMEOUT) as http:
                _answered(http.post(url, content=body, headers=headers, extensions=extensions))
    except Exception as exc:
        error = _error_of(exc)
        _log(target, note.attempts + 1, error)
    _done(note, error)
    return note


class _Refused(Exception):
    """The receiver answered, but not with a 2xx."""
