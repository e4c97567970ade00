"""A held message edited by a person before it is approved: which parts may change, and how
an edit is checked (texts are text; the typed envelope is validated against its model)."""

from __future__ import annotations

import contextlib
from typing import Any

from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.schemas.envelopes import ENVELOPE_MEDIA_TYPE, envelope_json, parse_envelope


def human_text(value: str, field: str) -> str:
    """A human's text, stripped; U+0000 refused (nothing stored may hold it)."""
    if "\x00" in value:
        raise ValidationFailed(
            "the text holds a NUL character", [FieldProblem(field, "remove the U+0000")]
        )
    return value.strip()


def edited_parts(parts: list[dict[str, Any]], edits: dict[int, Any]) -> list[dict[str, Any]]:
    """`parts` with edits applied: a text part's index -> its new text, an envelope part's
    index -> the new envelope (validated against its model). Raises ValidationFailed naming
    each problem (`parts.<i>` for a text, `envelope.<path>` for an envelope field)."""
    edited = [dict(p) for p in parts]
    for index, value in edits.items():
        if not 0 <= index < len(parts):
            raise ValidationFailed(
                "no such part", [FieldProblem(f"parts.{index}", "the message has no such part")]
            )
        part = edited[index]
        if "text" in part:
            text = human_text(str(value), f"parts.{index}")
            if not text:
                raise ValidationFailed(
                    "the edited message is empty",
                    [FieldProblem(f"parts.{index}", "write the text to send")],
                )
            part["text"] = text
        elif part.get("mediaType") == ENVELOPE_MEDIA_TYPE:
            try:
                envelope = parse_envelope(value)
            except ValidationFailed as exc:
                raise ValidationFailed(
                    "the edited envelope is not valid",
                    [
                        FieldProblem(f"envelope.{p.field}".rstrip("."), p.message)
                        for p in exc.problems
                    ],
                ) from None
            part["data"] = envelope_json(envelope)
        else:
            raise ValidationFailed(
                "this part cannot be edited",
                [FieldProblem(f"parts.{index}", "only text parts and the envelope can be edited")],
            )
    return edited


def canonical_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`parts` with each valid envelope as the hub writes it (defaults filled in), so a diff
    shows what a person changed, not what the hub normalised."""
    out = []
    for part in parts:
        if part.get("mediaType") == ENVELOPE_MEDIA_TYPE:
            with contextlib.suppress(ValidationFailed):
                part = {**part, "data": envelope_json(parse_envelope(part.get("data")))}
        out.append(part)
    return out
