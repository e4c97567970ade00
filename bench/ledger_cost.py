"""What the tamper-evident record costs: the hub's SendMessage throughput with HUB_LEDGER on
against off, in the same run, alternating.

    python bench/ledger_cost.py [--seconds 5] [--rounds 3] [--concurrency 16]

One run: the echo agent and two hub processes on one fresh database (SQLite unless
DATABASE_URL is set), one with the record on (its entries written in each group commit,
sealed every HUB_LEDGER_SEAL_SECONDS, a checkpoint signed every
HUB_LEDGER_CHECKPOINT_SECONDS), one with it off. Rounds alternate between them; medians are
reported, with the CPU each hub used per call. Target: on within 5% of off.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from load import Result, free_port, spawn, wait_for_port
from policy_cost import hub_server, median
from throughput import line, measured, prepare_hub


def entries() -> tuple[int, int]:
    """(entries in the record, of which sealed)."""
    from a2a_core.models import LedgerEntry

    return LedgerEntry.objects.count(), LedgerEntry.objects.filter(leaf_index__isnull=False).count()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16])
    args = parser.parse_args()

    echo_port, on_port, off_port = free_port(), free_port(), free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="hub-bench-ledger-"))
    echo = spawn(["bench/echo_agent.py", str(echo_port)])
    env, token = prepare_hub(data_dir, echo_port, incoming_concurrent=None)
    env = {**env, "DJANGO_SETTINGS_MODULE": "config.settings"}
    on = spawn(hub_server(on_port), env={**env, "HUB_LEDGER": "on"})
    off = spawn(hub_server(off_port), env={**env, "HUB_LEDGER": "off"})
    try:
        for port, proc in ((echo_port, echo), (on_port, on), (off_port, off)):
            wait_for_port(port, proc)
        database = "PostgreSQL" if "postgres" in env["DATABASE_URL"] else "SQLite"
        layer = "Redis" if os.environ.get("REDIS_URL") else "in-memory layer"
        print(
            f"SendMessage through the hub, the record on vs off: {args.seconds:g} s per run x "
            f"{args.rounds} rounds, alternating, uvicorn + {database} + {layer}"
        )
        hubs = {"on": (on_port, on.pid), "off": (off_port, off.pid)}
        for concurrency in args.concurrency:
            results: dict[str, list[Result]] = {"off": [], "on": []}
            load = {"concurrency": concurrency, "seconds": args.seconds, "token": token}
            for _ in range(args.rounds):
                for name in ("off", "on"):
                    port, pid = hubs[name]
                    url = f"http://127.0.0.1:{port}/a2a/echo/"
                    pids = {"hub": [pid], "echo": [echo.pid]}
                    results[name].append(measured(url, pids, **load))
            off_r, on_r = median(results["off"]), median(results["on"])
            for name, r in (("off", off_r), ("on", on_r)):
                runs = ", ".join(f"{x.rate:.0f}" for x in results[name])
                print(line(f"log {name}", r) + f"   (runs: {runs})")
            ratio = on_r.rate / off_r.rate
            print(
                f"         ratio on/off: throughput {ratio:.3f}x, p50 "
                f"{on_r.pct(50) / off_r.pct(50):.2f}x -> the record costs {1 - ratio:.1%} "
                f"(target within 5%: {'met' if ratio >= 0.95 else 'NOT met'})"
            )
            on_cpu, off_cpu = on_r.cpu_ms_per_call("hub"), off_r.cpu_ms_per_call("hub")
            print(
                f"         the hub's CPU a call: {on_cpu:.2f} ms on, {off_cpu:.2f} ms off "
                f"({on_cpu / off_cpu - 1:+.1%})"
            )
        total, sealed = entries()
        print(f"record: {total} entries, {sealed} sealed")
    finally:
        for proc in (on, off, echo):
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
