"""The `A2A-Version` a caller sends, read the same way on every binding and for cards."""

from __future__ import annotations

from packaging.version import Version


def a2a_major(version: str) -> int | None:
    """The major number of `version` ("1.0" -> 1), or None when it is not a version: not one by
    PEP 440, or one whose number Python will not read (over 4,300 digits, a ValueError that is
    not an InvalidVersion)."""
    try:
        return Version(version).major
    except ValueError:  # InvalidVersion is one
        return None
