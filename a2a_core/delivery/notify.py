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
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import EmailMessage
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from a2a_core.asyncdb import db
from a2a_core.backoff import backoff
from a2a_core.client.webhooks import HEADER, sign
from a2a_core.delivery.notify_text import (
    About,
    about_note,
    action_link,
    digest_of,
    one_line,
    slack_blocks,
)
from a2a_core.delivery.ssrf import NOTIFY, UnsafeTarget, resolve
from a2a_core.logging import get_logger
from a2a_core.models import (
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


def _about_batch(batch: Batch) -> About:
    if len(batch.notes) == 1:
        return about_note(batch.notes[0])
    return digest_of(batch.notes)


def _action_tokens(target: NotificationTarget, about: About) -> dict[str, str]:
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


def _send_email(target: NotificationTarget, about: About) -> None:
    """A plain-text email; its subject one line (no header can be added through it)."""
    body = f"{about.text}\n\nOpen it: {about.link}\n"
    links = _action_tokens(target, about)
    if links:
        body += (
            f"\nApprove: {links['approve']}\nReject: {links['reject']}\n"
            "(each link works once, for you only, after you log in; it asks you to confirm)\n"
        )
    EmailMessage(
        subject=one_line(about.title, 200),
        body=body,
        to=[target.address],
    ).send(using="default")


def _webhook_request(target: NotificationTarget, about: About) -> tuple[bytes, dict[str, str]]:
    if target.format == WebhookFormat.JSON:
        data: dict[str, Any] = {"event": about.event, "text": about.text, "link": about.link}
        data.update(about.data)
        raw = json.dumps(data, ensure_ascii=False).encode()
        return raw, {"Content-Type": "application/json", HEADER: sign(raw, target.secret)}
    slack: dict[str, Any] = {"text": about.slack}
    if about.can_act and settings.HUB_SLACK_SIGNING_SECRET:
        slack["blocks"] = slack_blocks(about)
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
