"""Running `manage.py a2a ...` in-process, as an operator would from a shell."""

from __future__ import annotations

import io

from django.core.management import call_command


def a2a(*args: str) -> str:
    """The command's standard output; a failure raises CommandError with its message."""
    out = io.StringIO()
    call_command("a2a", *args, stdout=out)
    return out.getvalue()
