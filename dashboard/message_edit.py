"""Forms generated from JSON Schemas: a held message's edit form (its text parts as text, its
typed envelope from the envelope model's schema) and the form of a structured answer an
agent asked for (from the agent's schema). See schemas/envelope_form.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.models import Message
from a2a_core.schemas.envelope_form import (
    FormField,
    answer_fields,
    envelope_fields,
    envelope_from_form,
)
from a2a_core.schemas.envelopes import ENVELOPE_MEDIA_TYPE, envelope_json, parse_envelope


@dataclass
class TextPart:
    index: int
    value: str
    errors: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"part-{self.index}"


@dataclass
class MessageEdit:
    texts: list[TextPart]
    # The envelope part's index and its canonical value, when the message carries one.
    envelope_index: int | None = None
    envelope: dict[str, Any] = field(default_factory=dict)
    fields: list[FormField] = field(default_factory=list)
    # Problems no single field shows.
    errors: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return str(self.envelope.get("kind", ""))


def message_edit(message: Message) -> MessageEdit:
    """The edit form of `message`, filled with what it says now."""
    edit = MessageEdit(
        texts=[
            TextPart(index=i, value=str(p["text"]))
            for i, p in enumerate(message.parts)
            if isinstance(p, dict) and "text" in p
        ]
    )
    for i, part in enumerate(message.parts):
        if isinstance(part, dict) and part.get("mediaType") == ENVELOPE_MEDIA_TYPE:
            try:
                edit.envelope = envelope_json(parse_envelope(part.get("data")))
            except ValidationFailed:
                break  # not a valid envelope (it was held as it came): text parts only
            edit.envelope_index = i
            edit.fields = envelope_fields(edit.envelope)
            break
    return edit


def edits_from(edit: MessageEdit, posted: Any) -> dict[int, Any]:
    """The service's `edits` from the submitted form; raises ValidationFailed for values
    that cannot be read (each named `envelope.<path>`)."""
    edits: dict[int, Any] = {t.index: str(posted.get(t.name, ""))[:100_000] for t in edit.texts}
    if edit.envelope_index is not None:
        envelope, problems = envelope_from_form(edit.envelope, edit.fields, posted)
        if problems:
            raise ValidationFailed(
                "the edited envelope is not valid",
                [FieldProblem(f"envelope.{p.field}", p.message) for p in problems],
            )
        edits[edit.envelope_index] = envelope
    return edits


def with_posted(edit: MessageEdit, posted: Any, problems: list[FieldProblem]) -> MessageEdit:
    """`edit` showing what was submitted, and each problem beside its field."""
    by_name: dict[str, list[str]] = {}
    for problem in problems:
        by_name.setdefault(problem.field, []).append(problem.message)
    shown: set[str] = set()
    for text in edit.texts:
        text.value = str(posted.get(text.name, text.value))
        key = f"parts.{text.index}"
        text.errors = by_name.get(key, [])
        shown.add(key)
    for f in edit.fields:
        if f.widget == "checkbox":
            f.checked = f.name in posted
        else:
            f.value = str(posted.get(f.name, f.value))
        key = f"envelope.{f.path}"
        # A problem inside a JSON field (envelope.to.0.agentId) shows beside that field.
        f.errors = [
            m for k, ms in by_name.items() if k == key or k.startswith(key + ".") for m in ms
        ]
        shown.update(k for k in by_name if k == key or k.startswith(key + "."))
    edit.errors = [
        f"{k}: {m}" if k else m for k, ms in by_name.items() if k not in shown for m in ms
    ]
    return edit


def answer_form(schema: Any) -> list[FormField]:
    """The fields of a structured answer (none: the JSON text instead)."""
    return answer_fields(schema)


def answer_data(fields: list[FormField], posted: Any) -> Any:
    """The structured answer typed into `fields`; raises ValidationFailed for values that
    cannot be read (each named `data.<path>`)."""
    data, problems = envelope_from_form({}, fields, posted)
    if problems:
        raise ValidationFailed(
            "the data is not valid", [FieldProblem(f"data.{p.field}", p.message) for p in problems]
        )
    return data


def answer_posted(fields: list[FormField], posted: Any, problems: list[FieldProblem]) -> None:
    """`fields` showing what was submitted, and each problem beside its field."""
    for f in fields:
        if f.widget == "checkbox":
            f.checked = f.name in posted
        else:
            f.value = str(posted.get(f.name, f.value))
        f.errors = [
            p.message for p in problems if p.field == f.name or p.field.startswith(f.name + ".")
        ]
