"""Running `manage.py a2a ...` in-process, as an operator would from a shell."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from django.core.management import call_command

from tests.conftest import database_url


def a2a(*args: str) -> str:
    """The command's standard output; a failure raises CommandError with its message."""
    out = io.StringIO()
    call_command("a2a", *args, stdout=out)
    return out.getvalue()


def cli_environment() -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }


MANAGE = [sys.executable, str(Path(__file__).resolve().parents[3] / "manage.py")]


def run_cli(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`manage.py a2a ...` in its own process, as from a shell (with `env` added to its
    environment)."""
    return subprocess.run(
        [*MANAGE, "a2a", *args],
        env={**cli_environment(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
