"""SendMessage throughput and latency: the a2a-sdk echo agent directly, then through the hub.

    python bench/throughput.py [--seconds 5] [--concurrency 1 16 64] [--server daphne|uvicorn]
                               [--incoming-concurrent N|none] [--timeline]

One run: starts the echo agent and the hub (embedded default: SQLite + in-memory layer, on a
fresh database) as separate processes, drives both with the same closed-loop JSON-RPC load,
prints req/s and p50/p99 for each, and the ratio hub/direct. Then checks that every request
the hub answered was persisted (a task and its messages).

The policy's rate limits are put out of reach (they would refuse calls); the hub's limit of
calls at once per agent (`incomingConcurrent`, which queues rather than refuses) stays at
its default unless `--incoming-concurrent` says otherwise.

`--timeline`: the hub notes when each call passes each point on its way (see
`a2a_core.timeline`: received, in the handler, taken into a group commit, accepted and
committed, forwarded, answered by the agent, the answer recorded, answered) and the p50 of
each stretch between two points is printed under each level's figures, over all its hub runs.
Costs a few microseconds per call: compare timelines with timelines.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from load import ROOT, Result, cpu_seconds, free_port, run_load, spawn, wait_for_port

OUT_OF_REACH = {"limits": {"perMinute": 10_000_000, "perHour": 100_000_000, "concurrent": 100_000}}


def prepare_hub(
    data_dir: Path, echo_port: int, incoming_concurrent: int | str | None = "default"
) -> tuple[dict[str, str], str]:
    """Migrate a fresh database, register the echo agent and a caller, put the policy's limits
    out of reach; return env, token."""
    env = {
        "HUB_DATA_DIR": str(data_dir),
        "DATABASE_URL": os.environ.get("DATABASE_URL", f"sqlite:///{data_dir / 'hub.sqlite3'}"),
        "HUB_LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import sys

    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from a2a_core.services.agents import agent_register

    call_command("migrate", verbosity=0)
    echo_card = {
        "name": "echo",
        "description": "Echoes every message.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {
                "url": f"http://127.0.0.1:{echo_port}/",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ],
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": ["echo"]}],
    }
    agent_register(card=echo_card)
    caller = agent_register(
        card={
            **echo_card,
            "name": "bench-caller",
            "skills": [{"id": "call", "name": "Call", "description": "calls", "tags": ["bench"]}],
        }
    )
    assert caller.token
    from django.db import connections

    from a2a_core.services.policy import policy_publish

    # Measure routing, not the default per-caller limits (which would refuse most calls).
    document = {"limits": dict(OUT_OF_REACH["limits"])}
    if incoming_concurrent != "default":
        document["limits"]["incomingConcurrent"] = incoming_concurrent
    policy_publish(document=document, reason="bench: limits out of reach")

    connections.close_all()
    return env, caller.token


def persisted() -> tuple[int, int]:
    from a2a_core.models import Message, Task

    return Task.objects.count(), Message.objects.count()


def line(label: str, r: Result) -> str:
    cpu = ", ".join(
        f"{name} {cores:.2f} cores = {r.cpu_ms_per_call(name):.2f} ms/call"
        for name, cores in r.cores.items()
    )
    return (
        f"{label:<8} c={r.concurrency:<3} {r.rate:8.1f} req/s   p50 {r.pct(50):7.2f} ms   "
        f"p99 {r.pct(99):7.2f} ms   errors {r.errors}   CPU: {cpu}"
    )


def stretches(path: Path) -> dict[str, list[float]]:
    """The hub's timeline lines (see `a2a_core.timeline`) as milliseconds per stretch, in the
    order the calls pass them; the file is emptied."""
    found: dict[str, list[float]] = defaultdict(list)
    for line in path.read_text().splitlines():
        marks = [(name, int(at)) for name, at in (mark.split(":") for mark in line.split())]
        for (a, began), (b, ended) in itertools.pairwise(marks):
            found[f"{a} -> {b}"].append((ended - began) / 1000)
        found["total"].append(marks[-1][1] / 1000)
    path.write_text("")
    return found


def timeline_lines(found: dict[str, list[float]]) -> list[str]:
    return [
        f"         {name:<22} p50 {statistics.median(ms):7.3f} ms  ({len(ms)} calls)"
        for name, ms in found.items()
    ]


def measured(url: str, pids: dict[str, list[int]], **load: Any) -> Result:
    """One load run, with the CPU each group of processes in `pids` used meanwhile (in cores)."""

    def used() -> dict[str, float]:
        return {name: sum(cpu_seconds(pid) for pid in group) for name, group in pids.items()}

    before = used()
    began = time.monotonic()
    result = asyncio.run(run_load(url, **load))
    wall = time.monotonic() - began
    result.cores = {name: (cpu - before[name]) / wall for name, cpu in used().items()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating direct/hub runs per level"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--server", choices=["daphne", "uvicorn"], default="uvicorn")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="hub processes (uvicorn workers, as `a2a serve --workers`); more than one needs REDIS_URL",
    )
    parser.add_argument(
        "--incoming-concurrent",
        default="default",
        help="the policy's calls at once per agent: a number, or none (default: the policy's default)",
    )
    parser.add_argument(
        "--timeline", action="store_true", help="print where a call's time goes in the hub"
    )
    args = parser.parse_args()
    slots: int | str | None = args.incoming_concurrent
    if slots == "none":
        slots = None
    elif slots != "default":
        slots = int(slots)

    echo_port, hub_port = free_port(), free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="hub-bench-"))
    echo = spawn(["bench/echo_agent.py", str(echo_port)])
    env, token = prepare_hub(data_dir, echo_port, slots)
    from a2a_core.cli.serve import spawn_hub

    timeline = data_dir / "timeline.txt"
    if args.timeline:
        os.environ["HUB_TIMELINE"] = str(timeline)

    # The hub as `a2a serve --no-demo` starts it (several workers share their counters).
    metrics_dir = tempfile.mkdtemp(prefix="hub-bench-metrics-") if args.workers > 1 else ""
    hubs = spawn_hub("127.0.0.1", hub_port, args.workers, args.server, metrics_dir, quiet=True)
    try:
        wait_for_port(echo_port, echo)
        wait_for_port(hub_port, hubs[0])
        direct_url = f"http://127.0.0.1:{echo_port}/"
        hub_url = f"http://127.0.0.1:{hub_port}/a2a/echo/"
        tasks_before, messages_before = persisted()
        layer = "Redis" if os.environ.get("REDIS_URL") else "in-memory layer"
        from a2a_core.schemas.policy import RateLimits

        print(
            f"SendMessage, {args.seconds:g} s per run x {args.rounds} rounds, hub on {args.server} "
            f"x{args.workers} + {'PostgreSQL' if 'postgres' in env['DATABASE_URL'] else 'SQLite'} + {layer}; "
            f"calls at once per agent (incomingConcurrent): {RateLimits().incoming_concurrent if slots == 'default' else slots}"
        )
        answered = 0
        summary = []
        for concurrency in args.concurrency:
            directs, throughs = [], []
            timelines: dict[str, list[float]] = defaultdict(list)
            # Alternate the two so drift on a shared machine hits both alike; report medians.
            for _ in range(args.rounds):
                directs.append(
                    measured(
                        direct_url,
                        {"echo": [echo.pid]},
                        concurrency=concurrency,
                        seconds=args.seconds,
                    )
                )
                throughs.append(
                    measured(
                        hub_url,
                        {"hub": [hub.pid for hub in hubs], "echo": [echo.pid]},
                        concurrency=concurrency,
                        seconds=args.seconds,
                        token=token,
                    )
                )
                if args.timeline:
                    for name, ms in stretches(timeline).items():
                        timelines[name] += ms
            answered += sum(t.requests - t.errors for t in throughs)
            direct = sorted(directs, key=lambda r: r.rate)[len(directs) // 2]
            through = sorted(throughs, key=lambda r: r.rate)[len(throughs) // 2]
            print(
                line("direct", direct) + f"   (runs: {', '.join(f'{r.rate:.0f}' for r in directs)})"
            )
            print(
                line("hub", through) + f"   (runs: {', '.join(f'{r.rate:.0f}' for r in throughs)})"
            )
            ratio = through.rate / direct.rate
            print(
                f"         ratio hub/direct: throughput {ratio:.2f}x, p50 {through.pct(50) / direct.pct(50):.2f}x"
            )
            if args.timeline:
                print("         the hub's timeline per call:")
                print("\n".join(timeline_lines(timelines)))
            summary.append((concurrency, ratio))
        tasks, messages = persisted()
        print(
            f"persisted: {tasks - tasks_before} tasks and {messages - messages_before} messages "
            f"(hub answered at least {answered} requests during measurement, plus warmups)"
        )
        for concurrency, ratio in summary:
            if concurrency == 16:
                verdict = "met" if ratio >= 0.5 else "NOT met"
                print(f"target: hub >= 0.5x direct at c=16 -> {verdict} ({ratio:.2f}x)")
    finally:
        for proc in (*hubs, echo):
            proc.terminate()
            proc.wait(10)
        if metrics_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
