"""Secrets at rest: sealed with Fernet (AES-128-CBC + HMAC-SHA256, `cryptography`) under the
key in `settings.HUB_SECRETS_KEY` (from the environment, else made into HUB_DATA_DIR).

A sealed blob is text safe to store anywhere; opening it needs the key and proves the blob is
the one sealed (a changed blob does not open). What is sealed is a JSON object; nothing here
logs, and neither error says anything about what was sealed.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class SealBroken(Exception):
    """A blob that does not open with this hub's key (another key, or changed)."""


@cache
def _fernet(key: str) -> Fernet:
    try:
        return Fernet(key.encode())
    except ValueError:
        raise SealBroken(
            "HUB_SECRETS_KEY is not a Fernet key (32 url-safe base64-encoded bytes); make one "
            "with: python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'"
        ) from None


def seal(value: dict[str, Any]) -> str:
    return _fernet(settings.HUB_SECRETS_KEY).encrypt(json.dumps(value).encode()).decode()


def unseal(blob: str) -> dict[str, Any]:
    try:
        opened = json.loads(_fernet(settings.HUB_SECRETS_KEY).decrypt(blob.encode()))
    except (InvalidToken, ValueError):
        raise SealBroken(
            "the stored credential does not open with this hub's HUB_SECRETS_KEY (the key "
            "changed since it was set): set it again"
        ) from None
    if not isinstance(opened, dict):
        raise SealBroken("the stored credential is not one this hub sealed: set it again")
    return opened
