"""Plain-text output helpers for the CLI: aligned tables and human times."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone

from a2a_core.errors import HubError


def add_as_option(parser: argparse.ArgumentParser) -> None:
    """`--as USER` on `parser` and every command under it (after the command or before it)."""
    parser.add_argument(
        "--as",
        dest="as_user",
        metavar="USER",
        default=argparse.SUPPRESS,
        help="the person this is done for, as audits and decisions show it "
        "(default: the OS user running the command)",
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                add_as_option(child)


def acting(args: argparse.Namespace) -> dict[str, Any]:
    """`actor` and `actor_label` for a service: the dashboard user named by `--as` (or the
    OS user) when one exists, and that name in any case."""
    from django.contrib.auth import get_user_model

    name = getattr(args, "as_user", None) or _os_user()
    user = get_user_model().objects.filter(username=name, is_active=True).first()
    return {"actor": user, "actor_label": name}


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (some containers)
        return "cli"


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


def cut(notice: str) -> None:
    """Say that the output stops short of everything that matched, on stderr (so a `--json`
    stream stays one object a line): never cut silently."""
    sys.stderr.write(f"Output cut: {notice}\n")
