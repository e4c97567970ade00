"""Working an inbox of escalations as a team: claims ("I'm on it") and decisions in bulk."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from a2a_core.errors import Conflict, FieldProblem, NotFound, ValidationFailed
from a2a_core.models import Escalation
from a2a_core.services.audit import audit_record
from a2a_core.services.escalations import (
    claim_holds,
    escalation_approve,
    escalation_redirect,
    escalation_reject,
    open_any,
    who_acts,
)
from a2a_core.services.questions import announce_escalation


@transaction.atomic
def escalation_claim(
    *,
    escalation_id: int,
    actor: User | None = None,
    actor_label: str = "",
    take_over: bool = False,
) -> Escalation:
    """Mark a pending escalation as taken by a person ("I'm on it"), shown live to everyone.

    Claiming one another person holds raises Conflict unless `take_over`; claiming one's own
    claim again changes nothing. A claim is advisory unless HUB_ESCALATION_CLAIMS is `hold`:
    then only its holder decides (see `claim_holds`), and taking it over is how another does.
    """
    escalation = open_any(escalation_id)
    who = who_acts(actor, actor_label)
    holder = escalation.claimed_by_name
    if holder == who:
        return escalation
    if holder and not take_over:
        raise Conflict(
            f"escalation {escalation_id} is claimed by {holder}; take it over to work on it",
            details={"claimedBy": holder},
        )
    escalation.claimed_by_name = who[:150]
    escalation.claimed_at = timezone.now()
    escalation.save(update_fields=["claimed_by_name", "claimed_at"])
    audit_record(
        action="escalation.take_over" if holder else "escalation.claim",
        summary=f"{who} took over escalation {escalation.pk} from {holder}"
        if holder
        else f"{who} claimed escalation {escalation.pk}",
        actor=actor,
        actor_label=who,
        agent=escalation.agent,
        object_type="escalation",
        object_id=escalation.pk,
        data={"from": holder} if holder else None,
    )
    announce_escalation(escalation, "escalation.claimed")
    return escalation


@transaction.atomic
def escalation_release(
    *, escalation_id: int, actor: User | None = None, actor_label: str = ""
) -> Escalation:
    """Give a claim up (whoever holds it, unless claims hold: then its holder alone); an
    unclaimed escalation is left as it is."""
    escalation = open_any(escalation_id)
    holder = escalation.claimed_by_name
    if not holder:
        return escalation
    who = who_acts(actor, actor_label)
    claim_holds(escalation, who)
    escalation.claimed_by_name = ""
    escalation.claimed_at = None
    escalation.save(update_fields=["claimed_by_name", "claimed_at"])
    audit_record(
        action="escalation.release",
        summary=f"{who} released escalation {escalation.pk}"
        + (f" (claimed by {holder})" if holder != who else ""),
        actor=actor,
        actor_label=who,
        agent=escalation.agent,
        object_type="escalation",
        object_id=escalation.pk,
    )
    announce_escalation(escalation, "escalation.claimed")
    return escalation


@dataclass
class BulkOutcome:
    done: list[int] = field(default_factory=list)
    # (escalation id, why it was not decided)
    skipped: list[tuple[int, str]] = field(default_factory=list)


# A bulk's decisions commit together, up to a page of cards at a time; each still has its own
# savepoint, so one already decided is skipped alone. Committed one by one, each decision was
# announced as it was made: every open inbox page fetched the inbox again, and those renders,
# with the first decisions' deliveries, competed with the rest of the bulk for the interpreter
# and the database. bench/bulk_decide.py (2026-11-28, two runs each, the code before and after
# alternated), PostgreSQL + Redis with one inbox page open: 20 approvals answered in 2.13 /
# 1.83 s before, 0.50 / 0.49 s after; 50 in 5.26 / 5.20 s before, 0.84 / 0.87 s after. SQLite
# with three pages open: 20 in 1.65 / 1.32 s before, 1.16 / 0.75 s after; 50 in 3.38 / 3.22 s
# before, 1.68 / 0.58 s after. Chunks of 20 answered 50 in 2.64 / 2.66 s (PostgreSQL): the
# first chunk's announcements and deliveries slow the rest. The chunk bounds how long one
# bulk holds SQLite's write lock: 0.6-1.7 s for 50 above.
BULK_CHUNK = 50


def escalations_decide(
    *,
    ids: Sequence[int],
    action: str,
    reason: str = "",
    to: str = "",
    actor: User | None = None,
    actor_label: str = "",
) -> BulkOutcome:
    """Approve, reject (one reason for all) or redirect several held messages.

    One already decided (or refused) is reported in `skipped` and does not stop the others.
    Each is taken once, in id order (the order their rows are locked in, so two people's
    overlapping bulks never wait on each other in a cycle); see BULK_CHUNK for the commits.
    """
    if action not in ("approve", "reject", "redirect"):
        raise ValidationFailed(
            "unknown action", [FieldProblem("action", "use approve, reject or redirect")]
        )
    if action == "reject" and not reason.strip():
        raise ValidationFailed(
            "a reason is required", [FieldProblem("reason", "say why; the calling agents see it")]
        )
    if action == "redirect" and not to:
        raise ValidationFailed("no agent chosen", [FieldProblem("to", "choose an agent")])
    outcome = BulkOutcome()
    pks = sorted(set(ids))
    for start in range(0, len(pks), BULK_CHUNK):
        with transaction.atomic():
            for pk in pks[start : start + BULK_CHUNK]:
                _decide_one(pk, action, reason, to, actor, actor_label, outcome)
    return outcome


def _decide_one(
    pk: int,
    action: str,
    reason: str,
    to: str,
    actor: User | None,
    actor_label: str,
    outcome: BulkOutcome,
) -> None:
    try:
        if action == "approve":
            escalation_approve(escalation_id=pk, actor=actor, actor_label=actor_label)
        elif action == "reject":
            escalation_reject(escalation_id=pk, reason=reason, actor=actor, actor_label=actor_label)
        else:
            escalation_redirect(escalation_id=pk, to=to, actor=actor, actor_label=actor_label)
    except (Conflict, NotFound) as exc:
        outcome.skipped.append((pk, exc.message))
    except ValidationFailed as exc:
        outcome.skipped.append((pk, "; ".join([exc.message, *map(str, exc.problems)])))
    else:
        outcome.done.append(pk)
