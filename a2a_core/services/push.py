"""Push notification configs: create, read, list, delete; and the delivery bookkeeping the
sender in `a2a_core.delivery.push` relies on (claims, progress, retries).

Only a party to a task (as `selectors.task_visible` decides) may configure pushes for it;
a config belongs to the agent that created it and nobody else sees it.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from a2a_core import selectors
from a2a_core.backoff import backoff
from a2a_core.errors import FieldProblem, NotFound, ValidationFailed
from a2a_core.models import TERMINAL_STATES, Agent, PushNotificationConfig, Task, TaskEvent

MAX_CONFIGS_PER_TASK = 10  # per owner
MAX_URL_LENGTH = 1000
MAX_TOKEN_LENGTH = 500
MAX_CONFIG_ID_LENGTH = 128
MAX_CREDENTIALS_LENGTH = 1000
# An HTTP auth-scheme is a token (RFC 9110): no spaces, no line breaks.
_SCHEME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# The token is sent as a header value: printable ASCII, no surrounding spaces.
_TOKEN = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$")


@dataclass(frozen=True)
class PushConfigInput:
    """A push notification config as an agent sent it, checked (see `push_config_check`)."""

    task_id: str
    config_id: str
    url: str
    token: str = ""
    auth_scheme: str = ""
    auth_credentials: str = ""


def _require(problems: list[FieldProblem], **values: str) -> None:
    for field, value in values.items():
        if not value:
            problems.append(FieldProblem(field, "is required"))


def _url_problem(url: str) -> str | None:
    if len(url) > MAX_URL_LENGTH:
        return f"must be at most {MAX_URL_LENGTH} characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return f"must be an http:// or https:// URL, got {parts.scheme or 'no'} scheme"
    if not parts.hostname:
        return "must name a host"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials; put them in authentication instead"
    if _CONTROL.search(url) or " " in url:
        return "must not contain spaces or control characters"
    return None


def push_config_check(
    *,
    task_id: str,
    config_id: str,
    url: str,
    token: str = "",
    auth_scheme: str = "",
    auth_credentials: str = "",
) -> PushConfigInput:
    """Check a config's fields; raise `ValidationFailed` listing every problem. An empty
    `config_id` gets a fresh one; `token` is optional, as in the A2A spec. Where the URL
    points is checked separately: see `a2a_core.delivery.ssrf`."""
    problems: list[FieldProblem] = []
    _require(problems, taskId=task_id, url=url)
    if url and (problem := _url_problem(url)):
        problems.append(FieldProblem("url", problem))
    if len(token) > MAX_TOKEN_LENGTH:
        problems.append(FieldProblem("token", f"must be at most {MAX_TOKEN_LENGTH} characters"))
    elif token and not _TOKEN.match(token):
        problems.append(
            FieldProblem(
                "token",
                "must be printable ASCII without line breaks or surrounding spaces "
                "(it is sent as the X-A2A-Notification-Token header)",
            )
        )
    if len(config_id) > MAX_CONFIG_ID_LENGTH:
        problems.append(FieldProblem("id", f"must be at most {MAX_CONFIG_ID_LENGTH} characters"))
    if auth_scheme and not _SCHEME.match(auth_scheme):
        problems.append(
            FieldProblem("authentication.scheme", "must be one HTTP auth scheme word, e.g. Bearer")
        )
    if auth_credentials and not auth_scheme:
        problems.append(
            FieldProblem("authentication.scheme", "is required with authentication.credentials")
        )
    if auth_scheme and not auth_credentials:
        problems.append(
            FieldProblem("authentication.credentials", "is required with authentication.scheme")
        )
    if _CONTROL.search(auth_credentials) or len(auth_credentials) > MAX_CREDENTIALS_LENGTH:
        problems.append(
            FieldProblem(
                "authentication.credentials",
                f"must be at most {MAX_CREDENTIALS_LENGTH} characters, without line breaks",
            )
        )
    if problems:
        raise ValidationFailed(
            "invalid push notification config: " + "; ".join(map(str, problems)), problems
        )
    return PushConfigInput(
        task_id=task_id,
        config_id=config_id or str(uuid.uuid4()),
        url=url,
        token=token,
        auth_scheme=auth_scheme,
        auth_credentials=auth_credentials,
    )


@transaction.atomic
def push_config_save(
    *, owner: Agent, target: Agent | None, config: PushConfigInput
) -> PushNotificationConfig:
    """Create the owner's config for the task, or replace the one with the same id (its
    delivery carries on from where it was, with a fresh count of attempts).

    New configs start from the task's first event, so nothing recorded before the config was
    created is missed. Raises `NotFound` unless `owner` is a party to the task (at `target`'s
    endpoint), `ValidationFailed` past MAX_CONFIGS_PER_TASK. The task row is locked, so
    concurrent creates respect the limit."""
    task = selectors.task_visible(task_id=config.task_id, agent=owner, target=target)
    Task.objects.select_for_update().filter(pk=task.pk).values_list("pk").first()
    mine = PushNotificationConfig.objects.filter(task=task, owner=owner)
    now = timezone.now()
    fields: dict[str, Any] = {
        "url": config.url,
        "token": config.token,
        "auth_scheme": config.auth_scheme,
        "auth_credentials": config.auth_credentials,
        "attempts": 0,
        "next_attempt_at": now,
    }
    row = mine.filter(config_id=config.config_id).first()
    if row is not None:
        if row.claim:  # a worker is sending: its lease stands
            del fields["next_attempt_at"]
        for name, value in fields.items():
            setattr(row, name, value)
        row.save()
        return row
    if mine.count() >= MAX_CONFIGS_PER_TASK:
        problem = FieldProblem(
            "taskId",
            f"you already have {MAX_CONFIGS_PER_TASK} push notification configs for this task; "
            "delete one first",
        )
        raise ValidationFailed(f"too many push notification configs: {problem}", [problem])
    return PushNotificationConfig.objects.create(
        task=task, owner=owner, config_id=config.config_id, **fields
    )


def push_config_save_for_retry(
    *, owner: Agent, target: Agent | None, config: PushConfigInput, id_named: bool
) -> PushNotificationConfig:
    """A retried message's inline config: `push_config_save`, unless the owner already has the
    same config on the task (same URL, token and authentication — and id, when `id_named`:
    the retry names one rather than leaving it to the hub); that one is left as it is, so a
    retry neither duplicates it nor restarts its delivery."""
    same = PushNotificationConfig.objects.filter(
        task_id=config.task_id,
        owner=owner,
        url=config.url,
        token=config.token,
        auth_scheme=config.auth_scheme,
        auth_credentials=config.auth_credentials,
    )
    if id_named:
        same = same.filter(config_id=config.config_id)
    found = same.first()
    if found is not None:
        return found
    return push_config_save(owner=owner, target=target, config=config)


def _ids(task_id: str, config_id: str | None = None) -> None:
    problems: list[FieldProblem] = []
    _require(problems, taskId=task_id)
    if config_id is not None:
        _require(problems, id=config_id)
    if problems:
        raise ValidationFailed(
            "invalid push notification config request: " + "; ".join(map(str, problems)),
            problems,
        )


def push_config_get(
    *, owner: Agent, target: Agent | None, task_id: str, config_id: str
) -> PushNotificationConfig:
    """The owner's config `config_id` of the task; `NotFound` for anyone else's."""
    _ids(task_id, config_id)
    task = selectors.task_visible(task_id=task_id, agent=owner, target=target)
    row = PushNotificationConfig.objects.filter(task=task, owner=owner, config_id=config_id).first()
    if row is None:
        raise NotFound(f"task {task_id} has no push notification config {config_id!r} of yours")
    return row


def push_config_list(
    *, owner: Agent, target: Agent | None, task_id: str
) -> list[PushNotificationConfig]:
    """The owner's configs for the task, oldest first (at most MAX_CONFIGS_PER_TASK)."""
    _ids(task_id)
    task = selectors.task_visible(task_id=task_id, agent=owner, target=target)
    return list(PushNotificationConfig.objects.filter(task=task, owner=owner))


def push_config_delete(*, owner: Agent, target: Agent | None, task_id: str, config_id: str) -> None:
    """Delete the owner's config: no POST starts after this (one already under way may
    finish). Idempotent, like the a2a-sdk: deleting a config that is not there (or is someone
    else's) changes nothing."""
    _ids(task_id, config_id)
    task = selectors.task_visible(task_id=task_id, agent=owner, target=target)
    PushNotificationConfig.objects.filter(task=task, owner=owner, config_id=config_id).delete()


# --- delivery bookkeeping ---------------------------------------------------------------------


@dataclass(frozen=True)
class PushBatch:
    """The next events to POST for one claimed config, in order, with where to send them."""

    config_id: str
    task_id: str
    url: str
    token: str
    auth_scheme: str
    auth_credentials: str
    # (seq, kind, payload) from the task's event log
    events: list[tuple[int, str, dict[str, Any]]]


def push_claim(*, limit: int, lease: timedelta) -> list[tuple[int, str]]:
    """Claim up to `limit` configs with events to send, due now: (pk, claim) pairs.

    Each row goes to one worker only: rows are locked with SKIP LOCKED where the database has
    it (SQLite's write lock serialises claims instead), and a claimed row's `next_attempt_at`
    moves past the lease, so nobody else takes it until the holder releases it or dies."""
    now = timezone.now()
    due = PushNotificationConfig.objects.filter(
        next_attempt_at__lte=now, delivered_seq__lt=F("task__event_seq")
    )
    # A cheap read first: most polls find nothing, and SQLite would take its write lock.
    if not due.exists():
        return []
    with transaction.atomic():
        rows = due.order_by("next_attempt_at")
        if connection.features.has_select_for_update_skip_locked:
            rows = rows.select_for_update(skip_locked=True, of=("self",))
        pks = list(rows.values_list("pk", flat=True)[:limit])
        claim = uuid.uuid4().hex
        PushNotificationConfig.objects.filter(pk__in=pks).update(
            claim=claim, next_attempt_at=now + lease
        )
    return [(pk, claim) for pk in pks]


def _held(pk: int, claim: str) -> Any:
    return PushNotificationConfig.objects.filter(pk=pk, claim=claim)


def push_pending(*, pk: int, claim: str, limit: int) -> PushBatch | None:
    """The next `limit` events for a claimed config. None when the claim is lost (the config
    was deleted, or the lease ran out) or nothing is left; then the claim is released, and a
    config whose task has ended is set aside for good."""
    row = _held(pk, claim).select_related("task").first()
    if row is None:
        return None
    events = list(
        TaskEvent.objects.filter(task_id=row.task_id, seq__gt=row.delivered_seq)
        .order_by("seq")
        .values_list("seq", "kind", "payload")[:limit]
    )
    if not events:
        done = row.task.state in TERMINAL_STATES
        _held(pk, claim).update(claim="", next_attempt_at=None if done else timezone.now())
        return None
    return PushBatch(
        config_id=row.config_id,
        task_id=row.task_id,
        url=row.url,
        token=row.token,
        auth_scheme=row.auth_scheme,
        auth_credentials=row.auth_credentials,
        events=events,
    )


def push_delivered(*, pk: int, claim: str, seq: int, status: int | None, lease: timedelta) -> bool:
    """Event `seq` is handled (delivered, or nothing to send): move on and renew the lease.
    False when the claim is lost (stop sending)."""
    now = timezone.now()
    fields: dict[str, Any] = {"delivered_seq": seq, "attempts": 0, "next_attempt_at": now + lease}
    if status is not None:
        fields.update(last_status=status, last_attempt_at=now)
    return bool(_held(pk, claim).filter(delivered_seq__lt=seq).update(**fields))


@dataclass(frozen=True)
class Failed:
    """What a failed attempt led to: `gave_up` on the event (the sender moves on to the next)
    or a retry at `retry_at` (the claim is released until then); `lost`: the claim was."""

    attempts: int
    gave_up: bool = False
    retry_at: datetime | None = None
    lost: bool = False


def push_failed(
    *,
    pk: int,
    claim: str,
    seq: int,
    status: int | None,
    error: str,
    max_attempts: int,
    first_retry_seconds: float,
    lease: timedelta,
) -> Failed:
    """Record a failed attempt at event `seq`. Retries wait `first_retry_seconds`, then twice
    as long each time (1, 2, 4, 8, 16 s by default); after `max_attempts` attempts the event is
    given up on (counted in `undelivered`, the error kept in `last_error`)."""
    with transaction.atomic():
        row = _held(pk, claim).filter(delivered_seq__lt=seq).select_for_update().first()
        if row is None:
            return Failed(attempts=0, lost=True)
        now = timezone.now()
        row.attempts += 1
        row.last_status = status
        row.last_attempt_at = row.last_error_at = now
        row.last_error = f"event {seq}, attempt {row.attempts}: {error}"[:2000]
        if row.attempts >= max_attempts:
            outcome = Failed(attempts=row.attempts, gave_up=True)
            row.delivered_seq = seq
            row.undelivered += 1
            row.attempts = 0
            row.next_attempt_at = now + lease
        else:
            delay = backoff(row.attempts, first_retry_seconds, 3600.0)
            outcome = Failed(attempts=row.attempts, retry_at=now + timedelta(seconds=delay))
            row.next_attempt_at = outcome.retry_at
            row.claim = ""
        row.save(
            update_fields=[
                "attempts",
                "last_status",
                "last_attempt_at",
                "last_error",
                "last_error_at",
                "delivered_seq",
                "undelivered",
                "next_attempt_at",
                "claim",
                "updated_at",
            ]
        )
    return outcome


def push_release(*, pk: int, claim: str) -> None:
    """Give a claim back (the sender stopped early); the config is due again at once."""
    _held(pk, claim).update(claim="", next_attempt_at=timezone.now())
