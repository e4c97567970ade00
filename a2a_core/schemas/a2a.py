"""Helpers for A2A messages in ProtoJSON form (camelCase dicts), as the hub stores them."""

from __future__ import annotations

from typing import Any

from a2a_core.schemas.envelopes import ENVELOPE_EXTENSION, ENVELOPE_MEDIA_TYPE

# The key under which the hub reads and writes its own fields in A2A metadata.
HUB_METADATA = "a2aHub"

ROLE_TO_WIRE = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
ROLE_FROM_WIRE = {"ROLE_USER": "user", "ROLE_AGENT": "agent", "user": "user", "agent": "agent"}


def hub_metadata(*sources: dict[str, Any] | None) -> dict[str, Any]:
    """The hub's fields from the first metadata dict that carries them."""
    for source in sources:
        value = (source or {}).get(HUB_METADATA)
        if isinstance(value, dict):
            return value
    return {}


def without_hub_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (metadata or {}).items() if k != HUB_METADATA}


def envelope_part_indexes(message: dict[str, Any]) -> list[int]:
    """Indexes of the parts that carry a typed envelope."""
    declared = ENVELOPE_EXTENSION in (message.get("extensions") or [])
    found = []
    for i, part in enumerate(message.get("parts") or []):
        if not isinstance(part, dict) or "data" not in part:
            continue
        if part.get("mediaType") == ENVELOPE_MEDIA_TYPE or declared:
            found.append(i)
    return found


def text_of(parts: list[dict[str, Any]]) -> str:
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and p.get("text"))


def parts_summary(parts: list[dict[str, Any]]) -> str:
    """A one-line summary of parts: their text, else what kind of content they carry."""
    if text := text_of(parts):
        return " ".join(text.split())[:200]
    labels = []
    for part in parts:
        if "data" in part:
            labels.append("[data]")
        elif "url" in part or "raw" in part:
            labels.append(f"[file {part.get('filename') or part.get('url', '')}]".strip())
    return " ".join(labels)[:200]


def holds_nul(value: Any) -> bool:
    """Whether a decoded JSON value has U+0000 in a string or a key: nothing the hub stores
    may (PostgreSQL's text and jsonb refuse it)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(k) or holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_nul(v) for v in value)
    return False


def holds_lone_surrogate(value: Any) -> bool:
    """Whether a decoded JSON value has a lone UTF-16 surrogate (from an escape such as
    `"\\ud800"`) in a string or a key: valid JSON syntax, but not Unicode, so no UTF-8 text,
    answer or database can hold it. (The decoder joins an escaped pair into one character.)"""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(holds_lone_surrogate(k) or holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_lone_surrogate(v) for v in value)
    return False
