"""What the coordinator costs: the hub's SendMessage throughput with the policy on vs off.

    python bench/policy_cost.py [--seconds 5] [--rounds 3] [--concurrency 16]

One run: the echo agent, and two hub processes on the same fresh database (SQLite unless
DATABASE_URL is set) — one with the policy on, one with HUB_POLICY_ENABLED=false. The active
policy keeps every check (matrix, limits, hops, loops, breakers, approvals) but its limits are
high enough that the load is never refused, so both hubs do the same work except judging.
Runs alternate between the two; medians are reported, with the CPU each hub used per call
(a finer measure than calls/s, which the shared machine moves). Target: the policy costs
under 10%.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from load import Result, free_port, spawn, wait_for_port
from throughput import line, measured, prepare_hub

POLICY = {
    "matrix": [
        {"caller": "bench-caller", "target": "echo", "action": "allow"},
        {"caller": "*", "target": "echo", "action": "deny", "kinds": ["broadcast"]},
    ],
    "limits": {"perMinute": 10_000_000, "perHour": 100_000_000, "concurrent": 100_000},
    "maxHops": 5,
    "approvals": [{"name": "escalations need a human", "kinds": ["escalation"]}],
}


def hub_server(port: int) -> list[str]:
    return [
        "-m",
        "uvicorn",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
        "config.asgi:application",
    ]


def decisions() -> dict[tuple[str, str], int]:
    from django.db.models import Count

    from a2a_core.models import Message

    rows = Message.objects.values_list("decision", "decision_reason").annotate(n=Count("pk"))
    return {(decision, reason): n for decision, reason, n in rows}


def median(results: list[Result]) -> Result:
    return sorted(results, key=lambda r: r.rate)[len(results) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16])
    args = parser.parse_args()

    echo_port, on_port, off_port = free_port(), free_port(), free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="hub-bench-policy-"))
    echo = spawn(["bench/echo_agent.py", str(echo_port)])
    env, token = prepare_hub(data_dir, echo_port)
    from a2a_core.services.policy import policy_publish

    policy_publish(document=POLICY, reason="bench: every check, limits out of reach")
    env = {**env, "DJANGO_SETTINGS_MODULE": "config.settings"}
    hub_on = spawn(hub_server(on_port), env={**env, "HUB_POLICY_ENABLED": "true"})
    hub_off = spawn(hub_server(off_port), env={**env, "HUB_POLICY_ENABLED": "false"})
    procs = [hub_on, hub_off, echo]
    try:
        for port, proc in ((echo_port, echo), (on_port, hub_on), (off_port, hub_off)):
            wait_for_port(port, proc)
        database = "PostgreSQL" if "postgres" in env["DATABASE_URL"] else "SQLite"
        layer = "Redis" if os.environ.get("REDIS_URL") else "in-memory layer"
        print(
            f"SendMessage through the hub, policy on vs off: {args.seconds:g} s per run x "
            f"{args.rounds} rounds, uvicorn + {database} + {layer}"
        )
        for concurrency in args.concurrency:
            offs, ons = [], []
            for _ in range(args.rounds):
                for port, proc, results in ((off_port, hub_off, offs), (on_port, hub_on, ons)):
                    url = f"http://127.0.0.1:{port}/a2a/echo/"
                    pids = {"hub": [proc.pid], "echo": [echo.pid]}
                    load = {"concurrency": concurrency, "seconds": args.seconds, "token": token}
                    results.append(measured(url, pids, **load))
            off, on = median(offs), median(ons)
            print(line("off", off) + f"   (runs: {', '.join(f'{r.rate:.0f}' for r in offs)})")
            print(line("on", on) + f"   (runs: {', '.join(f'{r.rate:.0f}' for r in ons)})")
            cost = 1 - on.rate / off.rate
            print(
                f"         ratio on/off: throughput {on.rate / off.rate:.2f}x, "
                f"p50 {on.pct(50) / off.pct(50):.2f}x -> the policy costs {cost:.1%} "
                f"(target < 10%: {'met' if cost < 0.10 else 'NOT met'})"
            )
            on_cpu, off_cpu = on.cpu_ms_per_call("hub"), off.cpu_ms_per_call("hub")
            print(
                f"         the hub's CPU a call: {on_cpu:.2f} ms on, {off_cpu:.2f} ms off "
                f"({on_cpu / off_cpu - 1:+.1%})"
            )
        print(
            "decisions recorded: "
            + ", ".join(f"{d} ({r or '-'}): {n}" for (d, r), n in sorted(decisions().items()))
        )
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
