"""Notification targets (who is told when an escalation waits) and the notifications queued
for them. Sending is a server process's background job (see a2a_core/delivery/notify.py):
queueing is a row insert, so telling people never slows routing down. A webhook target's
address gets the sender's own check when it is added (`a2a_core.delivery.ssrf`, the one
module of `delivery` this imports: it holds no state and imports no service).

Routing: a target's `rules` name the agents, pairs, kinds, priorities and skills it is told
about; an empty rule lets everything through (see `rules_match`). Escalation when nobody
answers: `notify_pass_on` (run by the sweeper) queues a `passed` notification for a target's
`pass_to` about each item that target was told about and that is still undecided
`pass_after_seconds` later; the next target is told whatever its own rules say, once per
item, and may pass it on again."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
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
    Agent,
    Escalation,
    EscalationKind,
    EscalationStatus,
    Notification,
    NotificationTarget,
    NotifyEvent,
    NotifyKeyUse,
    Priority,
    TargetKind,
    WebhookFormat,
)
from a2a_core.schemas.envelopes import KINDS
from a2a_core.services.audit import audit_record

# The routing rules a target may have, each a list of values (empty: everything).
RULES = ("agents", "pairs", "kinds", "priorities", "skills")
PASS_ON_BATCH = 500


def notify_rules(
    *,
    agents: list[str] | None = None,
    pairs: list[str] | None = None,
    kinds: list[str] | None = None,
    priorities: list[str] | None = None,
    skills: list[str] | None = None,
) -> dict[str, list[str]]:
    """Routing rules from their lists (values stripped, empties and repeats dropped); raises
    ValidationFailed naming each bad value: a pair is `caller:target`, a kind an escalation's
    (approval, input_required) or a message's, a priority low/normal/high/urgent."""
    given = {
        "agents": agents,
        "pairs": pairs,
        "kinds": kinds,
        "priorities": priorities,
        "skills": skills,
    }
    rules: dict[str, list[str]] = {}
    problems = []
    for name, values in given.items():
        cleaned = list(dict.fromkeys(v.strip()[:200] for v in values or () if v and v.strip()))
        if len(cleaned) > 100:
            problems.append(FieldProblem(name, "100 values at most"))
        for value in cleaned:
            if name == "pairs" and (value.count(":") != 1 or ":" in (value[0], value[-1])):
                problems.append(FieldProblem(name, f"{value!r} is not caller:target"))
            elif name == "kinds" and value not in (*EscalationKind.values, *KINDS):
                kinds_known = ", ".join([*EscalationKind.values, *KINDS])
                problems.append(FieldProblem(name, f"{value!r} is not one of {kinds_known}"))
            elif name == "priorities" and value not in Priority.values:
                known = ", ".join(Priority.values)
                problems.append(FieldProblem(name, f"{value!r} is not one of {known}"))
        if cleaned:
            rules[name] = cleaned
    if problems:
        raise ValidationFailed("invalid routing rule", problems)
    return rules


@dataclass(frozen=True)
class Routed:
    """What routing rules look at in an escalation."""

    agents: frozenset[str]
    pair: str
    kinds: frozenset[str]
    priority: str
    skill: str


def rules_match(rules: dict[str, list[str]], item: Routed) -> bool:
    """Whether a target with `rules` is told about `item`: every rule given must match (an
    agent is the caller, the target or the asker; a kind the escalation's or its message's)."""
    if (agents := rules.get("agents")) and not item.agents.intersection(agents):
        return False
    if (pairs := rules.get("pairs")) and item.pair not in pairs:
        return False
    if (kinds := rules.get("kinds")) and not item.kinds.intersection(kinds):
        return False
    if (priorities := rules.get("priorities")) and item.priority not in priorities:
        return False
    return not ((skills := rules.get("skills")) and item.skill not in skills)


def _routed(escalation: Escalation) -> Routed:
    task = escalation.task
    slugs = dict(
        Agent.objects.filter(
            pk__in=[task.caller_id, task.target_id, escalation.agent_id]
        ).values_list("pk", "slug")
    )
    caller = slugs.get(task.caller_id, "") if task.caller_id else ""
    target = slugs.get(task.target_id, "")
    kinds = {escalation.kind}
    if escalation.message is not None:
        kinds.add(escalation.message.kind)
    return Routed(
        agents=frozenset(slugs.values()),
        pair=f"{caller}:{target}",
        kinds=frozenset(kinds),
        priority=escalation.priority,
        skill=task.skill,
    )


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
    **options: Any,
) -> NotificationTarget:
    """Add a webhook (`format` slack or json; json ones get a generated HMAC secret) or an
    email address to tell about escalations, with the `options` `notify_target_update`
    takes. Raises ValidationFailed naming the field; a webhook the notifier would refuse to
    POST to is refused here, with the same reason (its host is looked up first, outside the
    transaction)."""
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
    fields = _options(kind=kind, **options)
    return _target_create(
        kind=kind,
        address=address,
        format=format,
        fields=fields,
        actor=actor,
        actor_label=actor_label,
    )


_UNSET: Any = object()


def _options(
    *,
    kind: str,
    digest_seconds: int | None = _UNSET,
    rules: dict[str, list[str]] = _UNSET,
    pass_to: int | None = _UNSET,
    pass_after_seconds: int | None = _UNSET,
    user: str | None = _UNSET,
    target_id: int | None = None,
) -> dict[str, Any]:
    """A target's settings as model fields, checked (only those given)."""
    fields: dict[str, Any] = {}
    if digest_seconds is not _UNSET:
        if digest_seconds is not None and not 0 <= digest_seconds <= 86400:
            raise ValidationFailed(
                "bad digest interval", [FieldProblem("digest", "0 to 86400 seconds")]
            )
        fields["digest_seconds"] = digest_seconds
    if rules is not _UNSET:
        fields["rules"] = notify_rules(**rules)
    if pass_to is not _UNSET:
        if pass_to is not None:
            if pass_to == target_id:
                raise ValidationFailed(
                    "bad pass-on", [FieldProblem("pass_to", "a target cannot pass to itself")]
                )
            if not NotificationTarget.objects.filter(pk=pass_to).exists():
                raise ValidationFailed(
                    "bad pass-on",
                    [FieldProblem("pass_to", f"there is no notification target {pass_to}")],
                )
        fields["pass_to_id"] = pass_to
    if pass_after_seconds is not _UNSET:
        if pass_after_seconds is not None and not 1 <= pass_after_seconds <= 7 * 86400:
            raise ValidationFailed(
                "bad pass-on", [FieldProblem("pass_after", "1 second to 7 days")]
            )
        fields["pass_after_seconds"] = pass_after_seconds
    if user is not _UNSET:
        if user and kind != TargetKind.EMAIL:
            raise ValidationFailed(
                "bad user", [FieldProblem("user", "only email targets act as a user")]
            )
        found = User.objects.filter(username=user, is_active=True).first() if user else None
        if user and found is None:
            raise ValidationFailed("bad user", [FieldProblem("user", f"no hub user {user!r}")])
        fields["user"] = found
    return fields


def notify_target_rules(*, target_id: int) -> dict[str, list[str]]:
    target = NotificationTarget.objects.filter(pk=target_id).first()
    if target is None:
        raise NotFound(f"there is no notification target {target_id}")
    return dict(target.rules or {})


def notify_target_update(
    *, target_id: int, actor: User | None = None, actor_label: str = "", **options: Any
) -> NotificationTarget:
    """Change a target's digest interval (`digest_seconds`, None for the hub's), routing
    rules (`rules`: the lists `notify_rules` takes), pass-on (`pass_to` a target's id and
    `pass_after_seconds`), or the hub user an email's links act as (`user`, a username).
    Only the options given change; ValidationFailed names a bad one. A changed digest
    interval lets what waits go at once."""
    with transaction.atomic():
        target = NotificationTarget.objects.select_for_update().filter(pk=target_id).first()
        if target is None:
            raise NotFound(f"there is no notification target {target_id}")
        fields = _options(kind=target.kind, target_id=target.pk, **options)
        interval = target.digest_seconds
        for name, value in fields.items():
            setattr(target, name, value)
        if target.digest_seconds != interval:
            # A new interval counts from now: what waits may go at once.
            target.next_send_at = None
        target.save()
        audit_record(
            action="notify.change",
            summary=f"changed how {target.kind} {target.shown_address} is told",
            actor=actor,
            actor_label=actor_label,
            object_type="notification_target",
            object_id=target.pk,
            data=_shown(fields),
        )
    return target


def _shown(fields: dict[str, Any]) -> dict[str, Any]:
    return {
        name: value.get_username() if isinstance(value, User) else value
        for name, value in fields.items()
    }


@transaction.atomic
def _target_create(
    *,
    kind: str,
    address: str,
    format: str,
    fields: dict[str, Any],
    actor: User | None,
    actor_label: str,
) -> NotificationTarget:
    who = actor.get_username() if actor is not None else actor_label or "the hub"
    target = NotificationTarget.objects.create(
        kind=kind,
        address=address,
        format=format,
        secret=secrets.token_urlsafe(32) if format == WebhookFormat.JSON else "",
        created_by_name=who,
        **fields,
    )
    audit_record(
        action="notify.add",
        summary=f"told {target.kind} {target.shown_address} about escalations",
        actor=actor,
        actor_label=actor_label,
        object_type="notification_target",
        object_id=target.pk,
        data={"kind": kind, "format": format, **_shown(fields)},
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


def notify_test(*, target_id: int) -> Notification:
    """Queue a test notification to one target, for the running hub to send at once (never
    held back by the target's digest interval). A test is tried once, never retried."""
    target = NotificationTarget.objects.filter(pk=target_id).first()
    if target is None:
        raise NotFound(f"there is no notification target {target_id}")
    note = Notification.objects.create(
        target=target, event=NotifyEvent.TEST, next_attempt_at=timezone.now()
    )
    _wake_on_commit()
    return note


def notify_queue(*, escalation: Escalation, event: str) -> int:
    """Queue `event` about `escalation` for every target whose routing rules let it through
    (each once; call it in the transaction that changed the escalation). Each waits for its
    target's next send (see `NotificationTarget.next_send_at`: the first goes at once, the
    rest in a digest). Returns how many were queued."""
    targets = list(NotificationTarget.objects.values_list("pk", "rules"))
    if any(rules for _, rules in targets):
        item = _routed(escalation)
        targets = [(pk, rules) for pk, rules in targets if rules_match(rules or {}, item)]
    if not targets:
        return 0
    now = timezone.now()
    made = Notification.objects.bulk_create(
        [
            Notification(target_id=pk, escalation=escalation, event=event, next_attempt_at=now)
            for pk, _ in targets
        ],
        ignore_conflicts=True,
    )
    _wake_on_commit()
    return len(made)


def notify_pass_on(*, now: datetime | None = None) -> int:
    """Escalation when nobody answers: for each target with a pass-on, queue `passed` for its
    `pass_to` about every pending escalation it was told about (arrived, or passed to it)
    at least `pass_after_seconds` ago. Each item reaches each next target once. Returns how
    many were queued."""
    now = now or timezone.now()
    queued = []
    chains = NotificationTarget.objects.filter(
        pass_to__isnull=False, pass_after_seconds__isnull=False
    ).values_list("pk", "pass_to_id", "pass_after_seconds")
    for target_id, next_id, after in chains:
        assert after is not None
        told = Notification.objects.filter(
            target_id=target_id,
            event__in=[NotifyEvent.ARRIVED, NotifyEvent.PASSED],
            created_at__lte=now - timedelta(seconds=after),
            escalation__status=EscalationStatus.PENDING,
        ).exclude(
            escalation__in=Notification.objects.filter(
                target_id=next_id, event=NotifyEvent.PASSED
            ).values("escalation")
        )
        escalation_ids = list(
            told.values_list("escalation_id", flat=True).distinct()[:PASS_ON_BATCH]
        )
        queued += [
            Notification(
                target_id=next_id, escalation_id=pk, event=NotifyEvent.PASSED, next_attempt_at=now
            )
            for pk in escalation_ids
        ]
    if not queued:
        return 0
    with transaction.atomic():
        made = Notification.objects.bulk_create(queued, ignore_conflicts=True)
        _wake_on_commit()
    return len(made)


def notify_keys_sweep(*, now: datetime | None = None) -> int:
    """Forget spent one-time keys older than a day (email links and Slack requests are
    refused by their own age long before)."""
    now = now or timezone.now()
    horizon = max(86400, settings.HUB_NOTIFY_LINK_SECONDS) + 600
    deleted, _ = NotifyKeyUse.objects.filter(
        created_at__lt=now - timedelta(seconds=horizon)
    ).delete()
    return deleted


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
