"""The policy as versioned data: publish a new version, roll back, diff, and the active one."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from a2a_core.errors import Conflict, FieldProblem, NotFound, ValidationFailed
from a2a_core.events import publish_many_on_commit
from a2a_core.models import PolicyVersion
from a2a_core.policy.compiled import CompiledPolicy
from a2a_core.schemas.events import PolicyActivated
from a2a_core.schemas.policy import Policy, RateLimits, default_policy, parse_policy
from a2a_core.services.audit import audit_record

# How stale a worker's cached policy may be when the change event does not reach it.
REFRESH_SECONDS = 1.0


def policy_diff(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """Changes from `old` to `new` (JSON values) as [{op, path, old, new}], paths dotted."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[dict[str, Any]] = []
        for key in sorted(set(old) | set(new), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in old:
                changes.append({"op": "added", "path": where, "new": new[key]})
            elif key not in new:
                changes.append({"op": "removed", "path": where, "old": old[key]})
            else:
                changes.extend(policy_diff(old[key], new[key], where))
        return changes
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        changes = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            changes.extend(policy_diff(a, b, f"{path}[{i}]"))
        return changes
    if old != new:
        return [{"op": "changed", "path": path or "(document)", "old": old, "new": new}]
    return []


def policy_active_version() -> PolicyVersion | None:
    return PolicyVersion.objects.filter(is_active=True).select_related("author").first()


def version_author(version: PolicyVersion) -> str:
    """Who published `version`, by name: the label it was published under (a user's name, or
    the person a command ran for), else its author's username."""
    if version.author_label:
        return version.author_label
    return version.author.get_username() if version.author is not None else ""


def policy_active() -> Policy:
    version = policy_active_version()
    return parse_policy(version.document) if version is not None else default_policy()


def _reason(reason: str) -> str:
    reason = reason.strip()
    if not reason:
        raise ValidationFailed(
            "a reason is required",
            [FieldProblem("reason", "say why the policy changes; it is kept in the history")],
        )
    return reason


@transaction.atomic
def policy_publish(
    *,
    document: Any,
    reason: str,
    actor: User | None = None,
    actor_label: str = "",
    action: str = "policy.publish",
) -> PolicyVersion:
    """Validate `document`, store it as the next version and make it the active one.

    Takes effect in every worker at once (a `policy` event) and within REFRESH_SECONDS even
    if the event is lost. Raises `ValidationFailed` (every problem, nothing stored) and
    `Conflict` when the document is the active policy already.
    """
    policy = parse_policy(document)
    why = _reason(reason)
    previous = PolicyVersion.objects.select_for_update().filter(is_active=True).first()
    before = previous.document if previous is not None else default_policy().as_document()
    after = policy.as_document()
    if previous is not None and before == after:
        raise Conflict(
            f"this is the active policy (v{previous.number}) already; nothing to publish",
            details={"activeVersion": previous.number},
        )
    number = (PolicyVersion.objects.aggregate(top=Max("number"))["top"] or 0) + 1
    PolicyVersion.objects.filter(is_active=True).update(is_active=False)
    version = PolicyVersion.objects.create(
        number=number,
        document=after,
        author=actor if actor is not None and actor.is_authenticated else None,
        author_label=actor_label or (actor.get_username() if actor is not None else ""),
        reason=why,
        diff=policy_diff(before, after),
        is_active=True,
        activated_at=timezone.now(),
    )
    audit_record(
        action=action,
        summary=f"policy v{number}: {why}",
        actor=actor,
        actor_label=actor_label,
        object_type="policy",
        object_id=number,
        data={"changes": len(version.diff)},
    )
    publish_many_on_commit([("policy", PolicyActivated(number=number))])
    transaction.on_commit(invalidate)
    return version


def policy_rollback(
    *, number: int, reason: str, actor: User | None = None, actor_label: str = ""
) -> PolicyVersion:
    """Make version `number`'s document active again, as a new version (history stays linear)."""
    old = PolicyVersion.objects.filter(number=number).first()
    if old is None:
        raise NotFound(f"there is no policy version {number}")
    return policy_publish(
        document=old.document,
        reason=f"rollback to v{number}: {_reason(reason)}",
        actor=actor,
        actor_label=actor_label,
        action="policy.rollback",
    )


# --- the active policy, cached in each process ------------------------------------------------

_lock = threading.Lock()
_cached: CompiledPolicy | None = None
_checked_at = 0.0


def current_policy() -> CompiledPolicy:
    """The active policy, compiled. Re-checks the active version at most once per
    REFRESH_SECONDS (a `policy` event makes the next call re-check at once). Sync: call on the
    database thread."""
    global _cached, _checked_at
    now = time.monotonic()
    cached = _cached
    if cached is not None and now - _checked_at < REFRESH_SECONDS:
        return cached
    number = (
        PolicyVersion.objects.filter(is_active=True).values_list("number", flat=True).first() or 0
    )
    if cached is None or cached.version != number:
        version = policy_active_version() if number else None
        if version is None:
            cached = CompiledPolicy(default_policy(), version=0)
        else:
            cached = CompiledPolicy(
                parse_policy(version.document),
                version=version.number,
                author=version_author(version),
            )
    with _lock:
        _cached, _checked_at = cached, now
    return cached


_DEFAULT_LIMITS = RateLimits()


def incoming_concurrent(slug: str) -> int | None:
    """How many calls the hub may have at agent `slug`'s server at once, by the policy this
    process last loaded (no database read: fit for the event loop; every accepted message
    keeps that policy fresh). Before the first load, the default."""
    cached = _cached
    limits = cached.limits_for(slug) if cached is not None else _DEFAULT_LIMITS
    return limits.incoming_concurrent


def invalidate() -> None:
    global _checked_at
    _checked_at = 0.0
