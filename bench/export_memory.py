"""`a2a export` over 1,000,000 stored messages: memory stays flat however many it writes.

    python bench/export_memory.py [--messages 1000000] [--agents 50] [--seed 3]

Fills a fresh database with `--messages` messages the way bench/audit_page.py does, then runs
`manage.py a2a export` in its own process three times — the first 10,000 messages, everything
as the traffic log (JSONL), everything as training data — and prints each run's peak resident
memory (from the kernel's accounting of that process), its time and the file it wrote, against
a baseline: the same command exporting nothing. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from _setup import ROOT, django_with_fresh_db
from audit_page import populate


def run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run `manage.py a2a ...`; its peak RSS (MB) and wall time (s)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "a2a", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        assert proc.stderr is not None
        raise SystemExit(f"a2a {' '.join(args)} failed: {proc.stderr.read().decode()}")
    return usage.ru_maxrss / 1024, elapsed


def fill(args: argparse.Namespace) -> None:
    """The child that fills the database; prints the database URL and where 10,000 end."""
    tmp = django_with_fresh_db("export")
    from django.db import connection

    from a2a_core.models import Message

    print(
        f"populating {args.messages:,} messages among {args.agents} agents ({connection.vendor})",
        file=sys.stderr,
    )
    start = time.perf_counter()
    populate(args.messages, args.agents, random.Random(args.seed))
    print(f"populated in {time.perf_counter() - start:.0f} s ({tmp})", file=sys.stderr)
    moments = Message.objects.order_by("created_at", "pk").values_list("created_at", flat=True)
    print(
        json.dumps(
            {
                "databaseUrl": os.environ["DATABASE_URL"],
                "dataDir": str(tmp),
                "until": moments[min(10_000, args.messages - 1)].isoformat(),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--fill", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        fill(args)
        return
    # This process stays small (no Django): a child's peak RSS counts what it was forked from.
    filled = subprocess.run(
        [sys.executable, __file__, "--fill", *sys.argv[1:]],
        stdout=subprocess.PIPE,
        check=True,
        text=True,
    )
    made = json.loads(filled.stdout.splitlines()[-1])  # after the progress lines
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": made["databaseUrl"],
        "HUB_DATA_DIR": made["dataDir"],
    }
    out = Path(made["dataDir"]) / "export.jsonl"
    cases = [
        ("nothing (baseline)", ["--type", "notification", "--until", "2000-01-01"]),
        ("first 10,000 messages", ["--until", made["until"]]),
        (f"all {args.messages:,} messages", []),
        (f"training data, all {args.messages:,}", ["--format", "training"]),
    ]
    print("\na2a export, each in its own process:")
    peaks = []
    for label, options in cases:
        rss, elapsed = run(["export", "--quiet", "-o", str(out), *options], env)
        lines = sum(1 for _ in out.open("rb")) if out.exists() else 0
        size = out.stat().st_size / 1e6 if out.exists() else 0.0
        rate = f"{lines / elapsed:,.0f} lines/s" if lines else ""
        print(
            f"  {label:<32} peak RSS {rss:6.1f} MB  {elapsed:6.1f} s  "
            f"{lines:>9,} lines  {size:7.1f} MB  {rate}"
        )
        peaks.append(rss)
        out.unlink(missing_ok=True)
    base, small, big = peaks[0], peaks[1], peaks[2]
    print(
        f"\npeak RSS over the baseline: 10,000 messages +{small - base:.1f} MB, "
        f"{args.messages:,} messages +{big - base:.1f} MB "
        f"(ratio all/10k of the peaks {big / small:.2f}x)"
    )


if __name__ == "__main__":
    main()
