"""The hub's logs read as lines for a person, and as JSON only when asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = """
import django
django.setup()
from a2a_core.logging import get_logger, trace_id_var
trace_id_var.set("0af7651916cd43dd8448eb211c80319c")
get_logger("delivery").warning("ledger did not answer", extra={"target": "ledger"})
"""


def log_line(**env: str) -> str:
    environ = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": "test-only-secret-key-not-for-production-0123456789abcdef",
        **env,
    }
    if "HUB_LOG_FORMAT" not in env:
        environ.pop("HUB_LOG_FORMAT", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=environ, capture_output=True, text=True, check=True
    )
    return done.stderr.strip()


def test_logs_are_lines_a_person_reads_by_default():
    line = log_line()
    assert line.endswith(
        "WARNING delivery: ledger did not answer  "
        "trace=0af7651916cd43dd8448eb211c80319c target=ledger"
    )
    assert not line.startswith("{")


def test_logs_are_json_objects_when_asked():
    entry = json.loads(log_line(HUB_LOG_FORMAT="json"))
    assert (entry["level"], entry["message"], entry["target"]) == (
        "warning",
        "ledger did not answer",
        "ledger",
    )
