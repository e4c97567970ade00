"""What judging costs: the hub's SendMessage throughput under a policy with every check on,
against the lightest policy the schema allows, alternating on one hub.

    python bench/policy_cost.py [--seconds 5] [--rounds 3] [--concurrency 16]
    python bench/policy_cost.py --content-rules 50 --size 10240 [...]

One run: the echo agent and one hub process on a fresh database (SQLite unless DATABASE_URL is
set). Rounds alternate between two published policies. The full one keeps every check
(matrix, limits, hops, loops, breakers, approvals, redirects) with limits out of reach, so the
load is never refused; the light one has no matrix, no limits, no loop detection, no breaker,
no approvals and no redirects. Both leave the agent's calls at once unbounded, so the two differ
only in what the judgement checks. Medians are reported, with the CPU the hub used per call (a
finer measure than calls/s, which the shared machine moves). Target: the checks cost under 10%.

With `--content-rules N`, the comparison is the lightest policy against the same plus N content
rules (every detector: secrets, cards, IBANs, emails, phones and patterns, redacting in both
directions, so the agent's echo of the message is scanned too), on messages of `--size`
characters of prose that no rule matches: what guarding costs when nothing is caught. Target:
50 rules on 10 KB messages cost under 10%.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from load import Result, free_port, spawn, wait_for_port
from throughput import line, measured, prepare_hub

UNBOUNDED = {"perMinute": None, "perHour": None, "concurrent": None, "incomingConcurrent": None}
FULL = {
    "matrix": [
        {"caller": "bench-caller", "target": "echo", "action": "allow"},
        {"caller": "*", "target": "echo", "action": "deny", "kinds": ["broadcast"]},
    ],
    "limits": {
        "perMinute": 10_000_000,
        "perHour": 100_000_000,
        "concurrent": 100_000,
        "incomingConcurrent": None,
    },
    "maxHops": 5,
    "approvals": [{"name": "escalations need a human", "kinds": ["escalation"]}],
}
LIGHT = {
    "limits": UNBOUNDED,
    "loopDetection": False,
    "breaker": {"enabled": False},
    "approvals": [],
    "redirects": [],
}
DETECTORS = ("secrets", "card", "iban", "email", "phone", "pattern")
PROSE = (
    "The review of the login page found two issues: the session cookie lacks the secure flag "
    "and the error message names the user. Order 1234 shipped on 2026-11-29 to Lyon; "
    "call the desk at extension 42 if the parcel is late. "
)


def guarded(rules: int) -> dict[str, Any]:
    """The light policy with `rules` content rules, every detector in turn."""
    content = []
    for i in range(rules):
        detect = DETECTORS[i % len(DETECTORS)]
        rule: dict[str, Any] = {
            "name": f"rule {i}",
            "detect": detect,
            "direction": "both",
            "action": "redact",
        }
        if detect == "pattern":
            rule["pattern"] = f"INTERNAL-{i:03d}-[0-9]{{4,}}"
        content.append(rule)
    return {**LIGHT, "contentRules": content}


def prose(size: int) -> str:
    """`size` characters of text no content rule finds anything in."""
    return (PROSE * (size // len(PROSE) + 1))[:size]


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
    parser.add_argument(
        "--content-rules",
        type=int,
        default=0,
        metavar="N",
        help="compare the light policy with itself plus N content rules (default: off)",
    )
    parser.add_argument(
        "--size", type=int, default=0, metavar="CHARS", help="message text size (default: short)"
    )
    args = parser.parse_args()
    text = prose(args.size) if args.size else "hello hub"
    if args.content_rules:
        heavy, heavy_name = guarded(args.content_rules), f"{args.content_rules} content rules"
        what = f"{heavy_name} vs none, on {len(text)}-character messages"
    else:
        heavy, heavy_name = FULL, "every check"
        what = "every check vs the lightest policy"

    echo_port, hub_port = free_port(), free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="hub-bench-policy-"))
    echo = spawn(["bench/echo_agent.py", str(echo_port)])
    env, token = prepare_hub(data_dir, echo_port, incoming_concurrent=None)
    env = {**env, "DJANGO_SETTINGS_MODULE": "config.settings"}
    hub = spawn(hub_server(hub_port), env=env)
    try:
        for port, proc in ((echo_port, echo), (hub_port, hub)):
            wait_for_port(port, proc)
        database = "PostgreSQL" if "postgres" in env["DATABASE_URL"] else "SQLite"
        layer = "Redis" if os.environ.get("REDIS_URL") else "in-memory layer"
        print(
            f"SendMessage through the hub, {what}: {args.seconds:g} s "
            f"per run x {args.rounds} rounds, alternating, uvicorn + {database} + {layer}"
        )
        url = f"http://127.0.0.1:{hub_port}/a2a/echo/"
        pids = {"hub": [hub.pid], "echo": [echo.pid]}
        for concurrency in args.concurrency:
            lights: list[Result] = []
            fulls: list[Result] = []
            load = {
                "concurrency": concurrency,
                "seconds": args.seconds,
                "token": token,
                "text": text,
            }
            for _ in range(args.rounds):
                for document, results in ((LIGHT, lights), (heavy, fulls)):
                    publish(document)
                    results.append(measured(url, pids, **load))
            light, full = median(lights), median(fulls)
            print(line("light", light) + f"   (runs: {', '.join(f'{r.rate:.0f}' for r in lights)})")
            label = "content" if args.content_rules else "full"
            print(line(label, full) + f"   (runs: {', '.join(f'{r.rate:.0f}' for r in fulls)})")
            cost = 1 - full.rate / light.rate
            print(
                f"         ratio {label}/light: throughput {full.rate / light.rate:.2f}x, "
                f"p50 {full.pct(50) / light.pct(50):.2f}x -> {heavy_name} cost {cost:.1%} "
                f"(target < 10%: {'met' if cost < 0.10 else 'NOT met'})"
            )
            full_cpu, light_cpu = full.cpu_ms_per_call("hub"), light.cpu_ms_per_call("hub")
            print(
                f"         the hub's CPU a call: {full_cpu:.2f} ms {label}, {light_cpu:.2f} ms light "
                f"({full_cpu / light_cpu - 1:+.1%})"
            )
        print(
            "decisions recorded: "
            + ", ".join(f"{d} ({r or '-'}): {n}" for (d, r), n in sorted(decisions().items()))
        )
    finally:
        for proc in (hub, echo):
            proc.terminate()
            proc.wait(10)


def publish(document: dict[str, Any]) -> None:
    """Make `document` the active policy, and wait until the hub has seen it (it re-checks the
    active version at most once a second)."""
    from a2a_core.services.policy import REFRESH_SECONDS, policy_publish

    policy_publish(document=document, reason="bench: policy cost")
    time.sleep(REFRESH_SECONDS + 0.2)


if __name__ == "__main__":
    main()
