"""How long `manage.py a2a` commands take from the shell, warm (target: under 1 s each for
`a2a --help` and `a2a agents`).

    python bench/cli_start.py [--runs 5] [--agents 20]

Registers `--agents` agents in a fresh database (SQLite unless DATABASE_URL is set), runs each
command once to warm the disk cache, then `--runs` times, each in its own process as a person
runs it, and prints the median and the slowest wall time; beside them, a bare Python start and
a bare `django.setup()`, the floor any command stands on. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from _setup import ROOT, django_with_fresh_db

COMMANDS = [
    ("a2a --help", [str(ROOT / "manage.py"), "a2a", "--help"]),
    ("a2a agents", [str(ROOT / "manage.py"), "a2a", "agents"]),
    ("a2a escalations", [str(ROOT / "manage.py"), "a2a", "escalations"]),
    ("a2a tasks", [str(ROOT / "manage.py"), "a2a", "tasks"]),
]
FLOORS = [
    ("python -c pass", ["-c", "pass"]),
    (
        "django.setup()",
        ["-c", "import django; django.setup()"],
    ),
]


def timed(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--agents", type=int, default=20)
    args = parser.parse_args()

    tmp = django_with_fresh_db("cli")
    from tests.factories import register

    for i in range(args.agents):
        register(f"agent-{i:02d}")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONPATH": str(ROOT)}
    print(f"{args.agents} agents ({os.environ['DATABASE_URL'].split(':')[0]}, {tmp}); wall time")
    results = {}
    for label, command in [*FLOORS, *COMMANDS]:
        timed(command, env)  # warm
        samples = [timed(command, env) for _ in range(args.runs)]
        results[label] = statistics.median(samples)
        print(
            f"  {label:<18} p50 {results[label] * 1000:7.0f} ms   max {max(samples) * 1000:7.0f} ms"
        )
    for label in ("a2a --help", "a2a agents"):
        p50 = results[label]
        print(
            f"target: {label} under 1 s warm -> {'met' if p50 < 1 else 'NOT met'} "
            f"(p50 {p50 * 1000:.0f} ms; django.setup() alone {results['django.setup()'] * 1000:.0f} ms)"
        )


if __name__ == "__main__":
    main()
