"""Running `manage.py a2a ...` in-process, as an operator would from a shell."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from django.core.management import call_command


def a2a(*args: str) -> str:
    """The command's standard output; a failure raises CommandError with its message."""
    out = io.StringIO()
    call_command("a2a", *args, stdout=out)
    return out.getvalue()


def database_url() -> str:
    """The test database, for a `manage.py` run in another process."""
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def cli_environment() -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }


MANAGE = [sys.executable, str(Path(__file__).resolve().parents[3] / "manage.py")]


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`manage.py a2a ...` in its own process, as from a shell."""
    return subprocess.run(
        [*MANAGE, "a2a", *args],
        env=cli_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
