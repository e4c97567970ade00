"""Shared setup for benchmark scripts: a throwaway database, Django configured against it."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def django_with_fresh_db(name: str) -> Path:
    """Point Django at a new database and migrate it. SQLite unless DATABASE_URL is set."""
    tmp = Path(tempfile.mkdtemp(prefix=f"hub-bench-{name}-"))
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'bench.sqlite3'}"
    os.environ.setdefault("HUB_DATA_DIR", str(tmp))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return tmp


def percentile(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def describe(samples_ms: list[float]) -> str:
    return (
        f"p50 {percentile(samples_ms, 50):.2f} ms  p99 {percentile(samples_ms, 99):.2f} ms  "
        f"mean {statistics.fmean(samples_ms):.2f} ms  (n={len(samples_ms)})"
    )
