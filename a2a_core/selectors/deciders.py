"""Who made each decision, by name, wherever decisions are shown.

A human decision (a held message approved, edited, redirected or rejected; a question
answered) is the person's: the escalation's `decided_by_name`, or the author of an answer. An
automatic decision is the policy's, and so the humans' behind it: the version that decided
(`Message.decision_policy_version`, written with the message) and the person who published
it, "policy v3 by alice" (`a2a_core.policy.wording.decided_by_policy`).

Read when showing decisions, never on the call path: a page of rows costs one query for its
human decisions, and a version's author is read once per process (a version never changes).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import NamedTuple

from a2a_core.models import Escalation, Message, PolicyVersion
from a2a_core.policy.wording import decided_by_policy

# Decision reasons that a person's action gave the message.
HUMAN_REASONS = frozenset(
    {"approved_by_human", "redirected_by_human", "rejected_by_human", "answered_by_human"}
)


class DecisionRef(NamedTuple):
    """What a decision's maker is read from: the message, its decision's reason, the policy
    version that judged it, its human author (an answer's) by username, and the decision's
    detail (a human decision's names who made it, as `services.escalations` writes it)."""

    pk: int
    reason: str
    policy_version: int | None
    author: str = ""
    detail: str = ""


# "answered by erin at 2026-11-29 11:00:00 UTC", "redirected to beta by erin at ...".
_NAMED = re.compile(r"^(?:\w+|redirected to \S+) by (.+?) at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def _named_in(detail: str) -> str:
    found = _NAMED.match(detail)
    return found.group(1) if found else ""


_lock = threading.Lock()
_authors: dict[int, str] = {}


def policy_deciders(versions: Iterable[int | None]) -> dict[int, str]:
    """ "policy vN by <author>" for each version number (0: the default policy), reading the
    authors not read before in one query."""
    wanted = {v for v in versions if v is not None}
    missing = {v for v in wanted if v not in _authors and v != 0}
    if missing:
        found = {
            number: label or username or ""
            for number, label, username in PolicyVersion.objects.filter(
                number__in=missing
            ).values_list("number", "author_label", "author__username")
        }
        with _lock:
            _authors.update(found)
    return {v: decided_by_policy(v, _authors.get(v, "")) for v in wanted}


def human_deciders(pks: Iterable[int]) -> dict[int, str]:
    """The person who decided on each of these held messages, by message pk (the last
    decision, should there be several)."""
    wanted = list(pks)
    if not wanted:
        return {}
    found: dict[int, str] = {}
    for message_pk, name, username in (
        Escalation.objects.filter(message_id__in=wanted, decided_at__isnull=False)
        .order_by("decided_at", "pk")
        .values_list("message_id", "decided_by_name", "decided_by__username")
    ):
        found[message_pk] = name or username or "the hub"
    return found


def deciders(refs: Iterable[DecisionRef]) -> dict[int, str]:
    """Who made each decision, by message pk ('' where the record does not say)."""
    refs = list(refs)
    humans = human_deciders(r.pk for r in refs if r.reason in HUMAN_REASONS)
    policies = policy_deciders(r.policy_version for r in refs if r.reason not in HUMAN_REASONS)
    out = {}
    for ref in refs:
        if ref.reason in HUMAN_REASONS:
            # An answer is its author's; one given from a command names the person in its
            # detail only.
            out[ref.pk] = humans.get(ref.pk) or ref.author or _named_in(ref.detail) or "a person"
        else:
            out[ref.pk] = (
                policies.get(ref.policy_version, "") if ref.policy_version is not None else ""
            )
    return out


def message_deciders(messages: Iterable[Message]) -> dict[int, str]:
    """Who made each message's decision, by pk (messages read with their `author`)."""
    return deciders(
        DecisionRef(
            m.pk,
            m.decision_reason,
            m.decision_policy_version,
            m.author.get_username() if m.author_id is not None and m.author is not None else "",
            m.decision_detail,
        )
        for m in messages
    )
