"""Notification targets (who is told when an escalation waits) and the notifications queued
for them. Sending is a server process's background job (see a2a_core/delivery/notify.py):
queueing is a row insert, so telling people never slows routing down. A webhook target's
address gets the sender's own check when it is added (`a2a_core.delivery.ssrf`, the one
module of `delivery` this imports: it holds no state and imports no service)."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator, URLValidator
from django.db import transaction
from django.utils import timezone

from a2a_core.delivery.ssrf import NOTIFY, UnsafeTarget, check_new_blocking
from a2a_core.errors import FieldProblem, NotFound, ValidationFailed
from a2a_core.models import (
    Escalation,
    EscalationStatus,
    Notification,
    NotificationTarget,
    NotifyEvent,
    TargetKind,
    WebhookFormat,
)
from a2a_core.services.audit import audit_record


def _webhook_address(address: str) -> None:
    """Refuse a webhook URL the notifier would not POST to now (see a2a_core.delivery.ssrf):
    its host resolved as the notifier resolves it, every spelling of a loopback or private
    address refused unless HUB_NOTIFY_ALLOWED_HOSTS lists it. The lookup waits at most
    HUB_NOTIFY_TIMEOUT; a host that does not resolve yet passes (sending checks again)."""
    try:
        parts = urlsplit(address)
    except ValueError:  # an unclosed IPv6 literal: not a URL, the validator says so
        return
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    try:
        check_new_blocking(address, wait_seconds=settings.HUB_NOTIFY_TIMEOUT, setting=NOTIFY)
    except UnsafeTarget as exc:
        raise ValidationFailed(
            "webhook address refused", [FieldProblem("address", str(exc))]
        ) from None


def notify_target_add(
    *,
    kind: str,
    address: str,
    format: str = "",
    actor: User | None = None,
    actor_label: str = "",
) -> NotificationTarget:
    """Add a webhook (`format` slack or json; json ones get a generated HMAC secret) or an
    email address to tell about escalations. Raises ValidationFailed naming the field; a
    webhook the notifier would refuse to POST to is refused here, with the same reason (its
    host is looked up first, outside the transaction)."""
    address = address.strip()
    if len(address) > 2000:
        raise ValidationFailed("too long", [FieldProblem("address", "2000 characters at most")])
    if kind == TargetKind.WEBHOOK:
        _webhook_address(address)
        try:
            URLValidator(schemes=["http", "https"])(address)
        except ValidationError:
            raise ValidationFailed(
                "not a webhook URL", [FieldProblem("address", "give an http:// or https:// URL")]
            ) from None
        format = format or WebhookFormat.SLACK
        if format not in WebhookFormat.values:
            raise ValidationFailed(
                "unknown format",
                [FieldProblem("format", f"use one of {', '.join(WebhookFormat.values)}")],
            )
    elif kind == TargetKind.EMAIL:
        try:
            EmailValidator()(address)
        except ValidationError:
            raise ValidationFailed(
                "not an email address", [FieldProblem("address", "give an email address")]
            ) from None
        format = ""
    else:
        raise ValidationFailed("unknown kind", [FieldProblem("kind", "use webhook or email")])
    return _target_create(
        kind=kind, address=address, format=format, actor=actor, actor_label=actor_label
    )


@transaction.atomic
def _target_create(
    *, kind: str, address: str, format: str, actor: User | None, actor_label: str
) -> NotificationTarget:
    who = actor.get_username() if actor is not None else actor_label or "the hub"
    target = NotificationTarget.objects.create(
        kind=kind,
        address=address,
        format=format,
        secret=secrets.token_urlsafe(32) if format == WebhookFormat.JSON else "",
        created_by_name=who,
    )
    audit_record(
        action="notify.add",
        summary=f"told {target.kind} {target.shown_address} about escalations",
        actor=actor,
        actor_label=actor_label,
        object_type="notification_target",
        object_id=target.pk,
        data={"kind": kind, "format": format},
    )
    return target


@transaction.atomic
def notify_target_remove(
    *, target_id: int, actor: User | None = None, actor_label: str = ""
) -> NotificationTarget:
    target = NotificationTarget.objects.filter(pk=target_id).first()
    if target is None:
        raise NotFound(f"there is no notification target {target_id}")
    audit_record(
        action="notify.remove",
        summary=f"stopped telling {target.kind} {target.shown_address} about escalations",
        actor=actor,
        actor_label=actor_label,
        object_type="notification_target",
        object_id=target.pk,
    )
    target.delete()
    return target


def notify_test(*, target_id: int, here: bool = True) -> Notification:
    """A test notification to one target. `here`: for the caller to send at once (see
    `notify_send_one`), leased like a claimed one so no server process sends it too; else
    queued for the server processes. A failed test is retried like any notification."""
    target = NotificationTarget.objects.filter(pk=target_id).first()
    if target is None:
        raise NotFound(f"there is no notification target {target_id}")
    due = timezone.now() + timedelta(seconds=settings.HUB_NOTIFY_TIMEOUT * 3 if here else 0)
    note = Notification.objects.create(target=target, event=NotifyEvent.TEST, next_attempt_at=due)
    if not here:
        _wake_on_commit()
    return note


def notify_queue(*, escalation: Escalation, event: str) -> int:
    """Queue `event` about `escalation` for every target (each once; call it in the
    transaction that changed the escalation). Returns how many were queued."""
    targets = list(NotificationTarget.objects.values_list("pk", flat=True))
    if not targets:
        return 0
    now = timezone.now()
    made = Notification.objects.bulk_create(
        [
            Notification(target_id=pk, escalation=escalation, event=event, next_attempt_at=now)
            for pk in targets
        ],
        ignore_conflicts=True,
    )
    _wake_on_commit()
    return len(made)


def notify_due_soon(*, now: datetime | None = None) -> int:
    """Queue the deadline warning for pending escalations whose deadline is less than
    HUB_NOTIFY_WARN_SECONDS away (each once per target); returns how many escalations."""
    if not NotificationTarget.objects.exists():
        return 0
    now = now or timezone.now()
    soon = Escalation.objects.filter(
        status=EscalationStatus.PENDING,
        deadline__gt=now,
        deadline__lte=now + timedelta(seconds=settings.HUB_NOTIFY_WARN_SECONDS),
    ).exclude(pk__in=Notification.objects.filter(event=NotifyEvent.DUE_SOON).values("escalation"))
    count = 0
    for escalation in soon[:200]:
        notify_queue(escalation=escalation, event=NotifyEvent.DUE_SOON)
        count += 1
    return count


def _wake_on_commit() -> None:
    from a2a_core.events import publish_many_on_commit
    from a2a_core.schemas.events import NotifyQueued

    # The runtime's bus wakes the notifier on this (see a2a_core/runtime.py).
    publish_many_on_commit([("outbox", NotifyQueued())])
