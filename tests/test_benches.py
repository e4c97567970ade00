"""The benches that fill a database row by row still fill the hub's schema and print figures.

They write their rows the way the hub records them, column by column, so a column the hub
adds breaks them (a new NOT NULL column stopped `audit_page.py` and `export_memory.py`). Each
runs here at a small size, on a throwaway SQLite database of its own, never the tests'; so
does `decide.py`, which builds its policies the way an admin writes them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.embedded  # the same in both runs: the PostgreSQL run leaves it out

BENCH = Path(__file__).resolve().parent.parent / "bench"

# audit_page.py exports the newest 10,000 delivered messages, so it needs about 13,000.
SMALL = [
    ("audit_page.py", ["--messages", "15000", "--agents", "10", "--runs", "1"], "first audit page"),
    ("export_memory.py", ["--messages", "400", "--agents", "5"], "peak RSS"),
    (
        "trace_list.py",
        ["--messages", "3000", "--agents", "10", "--runs", "1"],
        "first trace list page",
    ),
    (
        "escalation_page.py",
        # Past a page of cards: the dense list, its pages and its size.
        ["--pending", "150", "--decided", "10", "--agents", "5", "--runs", "1"],
        "dense list HTML",
    ),
    ("discovery.py", ["--agents", "50", "--queries", "5"], "target: p99 under 20 ms"),
    ("cli_start.py", ["--runs", "1", "--agents", "2"], "target: a2a agents under 1 s warm"),
    (
        "decide.py",
        ["--decisions", "6000", "--agents", "50", "--rules", "200"],
        "target p99 < 50 us",
    ),
    (
        "policy_cost.py",
        [
            *("--seconds", "0.5", "--rounds", "1", "--concurrency", "2"),
            *("--content-rules", "50", "--size", "10240"),
        ],
        "50 content rules cost",
    ),
    # Two hubs (the record on and off) and the echo agent, one short round each.
    (
        "ledger_cost.py",
        ["--seconds", "1", "--rounds", "1", "--concurrency", "4"],
        "ratio on/off",
    ),
]


@pytest.mark.parametrize(("script", "args", "printed"), SMALL, ids=[s[0] for s in SMALL])
def test_a_bench_runs_at_a_small_size_and_prints_its_figures(script, args, printed):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert printed in done.stdout, done.stdout[-3000:]
