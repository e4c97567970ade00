"""The edits people made to held messages before approving them, as the pages and the export
show them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from a2a_core.models import Escalation, EscalationKind, EscalationStatus
from a2a_core.schemas.a2a import text_of


@dataclass
class EditDiff:
    """A held message as it came and as a person edited it before approving it."""

    escalation_id: int
    editor: str
    original_text: str
    edited_text: str
    # The text's lines, each ("-" removed | "+" added | " " kept, line).
    lines: list[tuple[str, str]]
    # Every value that changed, by path ("parts[1].data.payload.title"): before and after.
    changes: list[dict[str, Any]]

    def as_json(self) -> dict[str, Any]:
        """The edit as the JSONL export writes it."""
        return {
            "escalationId": self.escalation_id,
            "editedBy": self.editor,
            "originalText": self.original_text,
            "editedText": self.edited_text,
            "changes": self.changes,
        }


def edit_diff(
    escalation: Escalation, message_parts: list[dict[str, Any]] | None = None
) -> EditDiff | None:
    """The edit a person made to a held message before approving it, or None when it went
    as it came. `message_parts`: the parts as sent (the message's own, by default)."""
    data = escalation.answer_data
    if escalation.kind != EscalationKind.APPROVAL or not isinstance(data, dict):
        return None
    original = data.get("originalParts")
    if not isinstance(original, list):
        return None
    diff = data.get("diff")
    changes: list[dict[str, Any]] = diff if isinstance(diff, list) else []
    if message_parts is None:
        message_parts = escalation.message.parts if escalation.message is not None else []
    before, after = text_of(original), text_of(message_parts)
    lines = [
        (line[0], line[2:])
        for line in difflib.ndiff(before.splitlines(), after.splitlines())
        if line[:1] in ("-", "+", " ")
    ]
    return EditDiff(
        escalation_id=escalation.pk,
        editor=escalation.decider,
        original_text=before,
        edited_text=after,
        lines=lines,
        changes=changes,
    )


def edits_of_messages(message_pks: Iterable[int]) -> dict[int, EditDiff]:
    """Message pk -> the edit a person made before approving it, for those edited (one
    query)."""
    edited = (
        Escalation.objects.filter(
            message_id__in=list(message_pks),
            kind=EscalationKind.APPROVAL,
            status__in=[EscalationStatus.APPROVED],
            answer_data__isnull=False,
        )
        .select_related("message", "decided_by")
        .order_by("pk")
    )
    found = {}
    for escalation in edited:
        diff = edit_diff(escalation)
        if diff is not None and escalation.message_id is not None:
            found[escalation.message_id] = diff
    return found
