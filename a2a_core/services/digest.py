"""What makes a retried message the same message: its digest."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# The fields of an A2A Message (ProtoJSON names) that say what the caller asked. `messageId`
# is kept beside the digest; anything added to the protocol later is left out until it is
# listed here.
_CONTENT_FIELDS = (
    "role",
    "parts",
    "taskId",
    "contextId",
    "metadata",
    "extensions",
    "referenceTaskIds",
)


def message_digest(message: dict[str, Any], *, target_pk: int | None) -> str:
    """The SHA-256 (hex) of the agent addressed (None: the hub itself) and the message's
    content as sent, in canonical JSON (sorted keys, no spaces), so that two sends of the same
    message have the same digest however their JSON was laid out. With the caller and the
    messageId it identifies a retry: the same digest is the same message, any other is a new
    one."""
    content = {name: message[name] for name in _CONTENT_FIELDS if message.get(name)}
    canonical = json.dumps(
        {"target": target_pk, "message": content},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()
