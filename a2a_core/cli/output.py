"""Plain-text output helpers for the CLI: aligned tables and human times."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone

from a2a_core.errors import HubError


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ago(moment: datetime | None) -> str:
    if moment is None:
        return "never"
    seconds = int((timezone.now() - moment).total_seconds())
    if seconds < 60:
        return f"{max(seconds, 0)}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m ago"
    if seconds < 86400:
        return f"{seconds // 3600}h ago"
    return f"{seconds // 86400}d ago"


def fail(message: str) -> CommandError:
    """One clear line on stderr and exit status 2."""
    return CommandError(message, returncode=2)


def hub_error(exc: HubError) -> CommandError:
    return fail(str(exc))


def read_json(path: Path) -> Any:
    """A JSON file ('-': stdin), or a clear error naming the file and where it is broken."""
    name = "stdin" if str(path) == "-" else str(path)
    try:
        text = sys.stdin.read() if name == "stdin" else path.read_text()
    except OSError as exc:
        raise fail(f"cannot read {name}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(
            f"{name} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
