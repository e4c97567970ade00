"""The CPU of the hub's two group commits — a call's accepted message, and the record of its
answer — by batch size, in one process, with no server, loop or other process beside them.

    python bench/group_commit.py [--backend sqlite postgres] [--sizes 1 2 4 8 16]
                                 [--batches 60] [--rounds 3] [--profile]

Each backend runs in a process of its own on a fresh database (SQLite in a temporary
directory; PostgreSQL: HUB_BENCH_DATABASE_URL with `_commit` after its name, dropped and
created again, and HUB_BENCH_REDIS_URL's database 9, emptied), prepared as
`bench/throughput.py` prepares a hub's: the echo agent and a caller registered, the policy's
rate limits out of reach. Then, round after round and batch size after batch size, `--batches`
batches of new messages from the caller to the echo agent are accepted (`writes_commit` of
`Inbound`s, one transaction each) and their answers recorded (`writes_commit` of `Reply`s),
as the hub's writer thread runs them, the events each commit publishes kept back there
(`events.held`) and dropped. The process's CPU time (`time.process_time`) of each is summed
per size; medians over the rounds are printed.

Printed per backend: CPU per call of each commit at each size, and as a ratio against a batch
of one (what group commit saves); a straight-line fit, what a commit costs whatever it carries
and what each call adds to it; and what halving the batch costs a call (two workers at the same
concurrency halve each process's batches). With both backends, PostgreSQL's CPU per call
against SQLite's at each size: the writer's share of the scaled mode's CPU target, without
the database server's own (PostgreSQL's CPU is its own process's, not counted here).

`--profile`: after the rounds, the functions that took the most time (cProfile, wall time,
so waits for the database count) over a batch size of 8.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from throughput import POSTGRES_URL, REDIS_URL, fresh_postgres, fresh_redis  # noqa: E402

COMMIT_DATABASE_URL = urlunsplit(
    urlsplit(POSTGRES_URL)._replace(path=f"{urlsplit(POSTGRES_URL).path}_commit")
)
COMMIT_REDIS_URL = urlunsplit(urlsplit(REDIS_URL)._replace(path="/9"))
KINDS = ("accept", "record")


def _measure(sizes: list[int], batches: int, rounds: int, profile: bool) -> dict[str, Any]:
    """In a child process, Django set up on its database: CPU ms per call by kind and size."""
    import django

    django.setup()
    import throughput

    from a2a_core import agent_cache, events
    from a2a_core.services.messages import Inbound
    from a2a_core.services.tasks import Reply
    from a2a_core.services.writes import writes_commit

    throughput._register(9, "default")  # nothing is sent to the echo agent: any port
    echo = agent_cache.agent_by_slug("echo")
    caller = agent_cache.agent_by_slug("bench-caller")
    assert echo is not None and caller is not None

    def committed(ops: list[Any]) -> list[Any]:
        with events.held():
            results = writes_commit(ops)
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise SystemExit(f"a group commit failed: {failed[0]!r}")
        return results

    def message(role: str, text: str) -> dict[str, Any]:
        return {"messageId": uuid.uuid4().hex, "role": role, "parts": [{"text": text}]}

    def one_batch(size: int) -> tuple[float, float]:
        inbound = [
            Inbound(caller=caller, target=echo, message=message("ROLE_USER", "hi"))
            for _ in range(size)
        ]
        began = time.process_time()
        accepted = committed(inbound)
        accept = time.process_time() - began
        answers = [
            Reply(
                a.task_id, message("ROLE_AGENT", "echo: hi"), (a.message_pk, a.message_created_at)
            )
            for a in accepted
        ]
        began = time.process_time()
        committed(answers)
        return accept, time.process_time() - began

    for size in sizes:  # warm up: statements composed, cached and (PostgreSQL) prepared
        for _ in range(10):
            one_batch(size)
    per_round: dict[str, dict[int, list[float]]] = {kind: {s: [] for s in sizes} for kind in KINDS}
    for _ in range(rounds):
        for size in sizes:
            spent = [0.0, 0.0]
            for _ in range(batches):
                accept, record = one_batch(size)
                spent[0] += accept
                spent[1] += record
            for kind, total in zip(KINDS, spent, strict=True):
                per_round[kind][size].append(total / batches / size * 1000)
    out: dict[str, Any] = {
        kind: {str(s): statistics.median(v) for s, v in by_size.items()}
        for kind, by_size in per_round.items()
    }
    if profile:
        import cProfile
        import io
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(batches):
            one_batch(8)
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
        out["profile"] = text.getvalue()
    return out


def _child(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "HUB_LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    tmp = Path(tempfile.mkdtemp(prefix="hub-bench-commit-"))
    env["HUB_DATA_DIR"] = str(tmp)
    if backend == "postgres":
        fresh_postgres(COMMIT_DATABASE_URL)
        fresh_redis(COMMIT_REDIS_URL)
        env["DATABASE_URL"], env["REDIS_URL"] = COMMIT_DATABASE_URL, COMMIT_REDIS_URL
    else:
        env["DATABASE_URL"] = f"sqlite:///{tmp / 'hub.sqlite3'}"
    command = [sys.executable, __file__, "--child", *map(str, args.sizes)]
    command += ["--batches", str(args.batches), "--rounds", str(args.rounds)]
    command += ["--profile"] * args.profile
    done = subprocess.run(command, env=env, check=True, cwd=ROOT, capture_output=True, text=True)
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def _fit(by_size: dict[str, float]) -> tuple[float, float]:
    """(ms a commit, ms a call): the straight line through the batches' CPU by size."""
    sizes = [int(s) for s in by_size]
    totals = [by_size[str(s)] * s for s in sizes]
    slope, intercept = statistics.linear_regression(sizes, totals)
    return intercept, slope


def report(backend: str, found: dict[str, Any], sizes: list[int]) -> list[str]:
    label = {"sqlite": "SQLite", "postgres": "PostgreSQL + Redis"}[backend]
    lines = [f"-- {label}"]
    for kind in KINDS:
        by_size = found[kind]
        cells = "  ".join(f"{s}: {by_size[str(s)]:.3f}" for s in sizes)
        lines.append(f"{kind:7s} CPU ms per call by batch size   {cells}")
        if 1 in sizes:
            ratios = "  ".join(f"{s}: {by_size[str(s)] / by_size['1']:.2f}x" for s in sizes)
            lines.append(f"{'':7s} against a batch of one          {ratios}")
        if len(sizes) > 1:
            fixed, each = _fit(by_size)
            lines.append(
                f"{'':7s} a commit {fixed:.3f} ms whatever it carries, {each:.3f} ms a call"
            )
        halved = [(s, s // 2) for s in sizes if s % 2 == 0 and s // 2 in sizes]
        if halved:
            cells = "  ".join(
                f"{s}->{h}: {by_size[str(h)] / by_size[str(s)]:.2f}x" for s, h in halved
            )
            lines.append(f"{'':7s} a call when its batch is halved  {cells}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backend", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"]
    )
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 2, 4, 8, 16])
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--child", nargs="+", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if any(s < 1 for s in args.sizes) or args.batches < 1 or args.rounds < 1:
        parser.error("sizes, --batches and --rounds must be at least 1")
    if args.child:
        print(json.dumps(_measure(args.child, args.batches, args.rounds, args.profile)))
        return
    sizes = sorted(set(args.sizes))
    print(f"group commits: {args.batches} batches per size x {args.rounds} rounds, medians")
    results = {backend: _child(backend, args) for backend in args.backend}
    for backend, found in results.items():
        print("\n".join(report(backend, found, sizes)))
        if "profile" in found:
            print(found["profile"])
    if set(results) == {"sqlite", "postgres"}:
        print("-- PostgreSQL's writer CPU per call against SQLite's (the server's own not counted)")
        for kind in KINDS:
            cells = "  ".join(
                f"{s}: {results['postgres'][kind][str(s)] / results['sqlite'][kind][str(s)]:.2f}x"
                for s in sizes
            )
            print(f"{kind:7s} {cells}")


if __name__ == "__main__":
    main()
