"""SendMessage throughput and latency: the a2a-sdk echo agent directly, then through the hub,
for each backend and number of workers asked for, all in one run.

    python bench/throughput.py [--seconds 5] [--rounds 3] [--concurrency 1 16 64]
                               [--backend sqlite postgres] [--workers 1 2]
                               [--server uvicorn|daphne] [--incoming-concurrent N|none]
                               [--timeline]

Each configuration (a backend, with as many workers as asked: SQLite always runs one) gets a
fresh database, the echo agent registered and a caller, and a hub started as an operator
starts it (`manage.py a2a serve --no-demo --workers N`); all of them run for the whole bench.
At each concurrency level the same closed-loop JSON-RPC load goes to the echo agent directly
and then through each configuration's hub in turn (every other round in the reverse order),
round after round (`--rounds`, medians reported): drift on a shared machine (its speed can
halve within minutes) hits the direct runs and every configuration alike, so the comparisons
between configurations (CPU per call, two workers against one) are made within the same
minutes as hub against direct. Printed: req/s, p50/p99, the CPU each process used per call,
the ratio hub/direct, and then every target of the scaled-mode work as a ratio measured
within this run (the ratios between two configurations also round by round), and under each
throughput target not met, what it asks of the CPU: the calls/s it wants need every process's
CPU per call (the load generator's included) to fit in the machine's cores, and the hub's in
its processes at a full core each, beside what a call costs now. Last, a check that every
call each hub answered was persisted.

PostgreSQL: the database named by HUB_BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/a2a_bench), dropped and created again; with several
PostgreSQL configurations, one database each, named with `_w<workers>` after it. Redis:
HUB_BENCH_REDIS_URL (default redis://127.0.0.1:6379/7), emptied first; with several
configurations, the databases numbered after it.

The policy's rate limits are put out of reach (they would refuse calls); the hub's limit of
calls at once per agent (`incomingConcurrent`, which queues rather than refuses) stays at
its default unless `--incoming-concurrent` says otherwise.

`--timeline`: the hub notes when each call passes each point on its way (see
`a2a_core.timeline`: received, in the handler, taken into a group commit, accepted and
committed, forwarded, answered by the agent, the answer recorded, answered) and the p50 of
each stretch between two points is printed under each level's figures, over all its hub runs.
Costs a few microseconds per call: compare timelines with timelines.

`--against DIR`: each configuration is run a second time, its hub served from the code at
DIR (another checkout of the hub: `git worktree add /tmp/before <commit>`), with a database
of its own prepared by this checkout (so both must have the same migrations), and loaded in
turn with the others in each round: a change measured against the code before it in the same
minutes, where runs one after the other would carry the machine's drift. Its figures are
printed under their own label and take no part in the targets.

`--floor`: each round also loads a bare proxy (`bench/floor_proxy.py`: the a2a-sdk's server
forwarding to the agent with the a2a-sdk client, nothing else), and each level prints it
beside the others: what any hub built on the SDK costs per call before doing anything of its
own (floor/direct), and what the hub's own work costs on top of it (hub/floor).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from load import (
    ROOT,
    Result,
    cpu_seconds,
    free_port,
    machine_cpu,
    run_load,
    spawn,
    wait_for_port,
)

OUT_OF_REACH = {"limits": {"perMinute": 10_000_000, "perHour": 100_000_000, "concurrent": 100_000}}
POSTGRES_URL = os.environ.get(
    "HUB_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/a2a_bench"
)
REDIS_URL = os.environ.get("HUB_BENCH_REDIS_URL", "redis://127.0.0.1:6379/7")


# --- in a child process: the hub's database, through Django -----------------------------------


def _register(echo_port: int, incoming_concurrent: int | str | None) -> str:
    """Migrate, register the echo agent and a caller, put the policy's limits out of reach;
    the caller's token (Django set up, on the hub's database)."""
    from django.core.management import call_command
    from django.db import connection

    from a2a_core.models import Agent
    from a2a_core.services.agents import agent_register
    from a2a_core.services.policy import policy_publish

    call_command("migrate", verbosity=0)
    if Agent.objects.exists():
        database = connection.settings_dict["NAME"]
        raise SystemExit(
            f"the database {database} already holds a hub's agents (an earlier run's?): "
            "give the bench an empty one"
        )
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
    # Measure routing, not the default per-caller limits (which would refuse most calls).
    document: dict[str, Any] = {"limits": dict(OUT_OF_REACH["limits"])}
    if incoming_concurrent != "default":
        limit = None if incoming_concurrent in (None, "none") else int(incoming_concurrent)
        document["limits"]["incomingConcurrent"] = limit
    policy_publish(document=document, reason="bench: limits out of reach")
    assert caller.token
    return caller.token


def prepare_hub(
    data_dir: Path, echo_port: int, incoming_concurrent: int | str | None = "default"
) -> tuple[dict[str, str], str]:
    """For the other benches: point this process's Django at a fresh database in `data_dir`
    (or DATABASE_URL), prepare it as `_register` does; return the hub's env and the token."""
    env = {
        "HUB_DATA_DIR": str(data_dir),
        "DATABASE_URL": os.environ.get("DATABASE_URL", f"sqlite:///{data_dir / 'hub.sqlite3'}"),
        "HUB_LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connections

    token = _register(echo_port, incoming_concurrent)
    connections.close_all()
    return env, token


def prepare(echo_port: int, incoming_concurrent: str) -> None:
    """`_register`, printing the token (a child process run with the hub's environment)."""
    import django

    sys.path.insert(0, str(ROOT))
    django.setup()
    print(json.dumps({"token": _register(echo_port, incoming_concurrent)}))


def count() -> None:
    """Print how many tasks and messages the hub's database holds."""
    import django

    sys.path.insert(0, str(ROOT))
    django.setup()
    from a2a_core.models import Message, Task

    print(json.dumps({"tasks": Task.objects.count(), "messages": Message.objects.count()}))


# --- in the bench's own process ------------------------------------------------------------------


@dataclass
class Config:
    backend: str
    workers: int
    code: Path = ROOT  # the checkout its hub runs from (`--against`)
    database_url: str = ""
    redis_url: str = ""
    env: dict[str, str] = field(default_factory=dict)
    # While its hub runs:
    hub: subprocess.Popen[bytes] | None = None
    url: str = ""
    token: str = ""
    data_dir: Path | None = None
    timeline: Path | None = None
    counted: dict[str, int] = field(default_factory=dict)
    answered: int = 0

    @property
    def against(self) -> bool:
        return self.code != ROOT

    @property
    def key(self) -> tuple[str, int]:
        """Its results' key: the backend and workers, or for `--against` the code's place too
        (the targets read the keys of this checkout's configurations only)."""
        return (f"{self.backend} at {self.code}" if self.against else self.backend, self.workers)

    @property
    def label(self) -> str:
        name = "SQLite + in-memory layer" if self.backend == "sqlite" else "PostgreSQL + Redis"
        code = f", the code at {self.code}" if self.against else ""
        return f"{name}, {self.workers} worker{'s' if self.workers > 1 else ''}{code}"


def stores(configs: list[Config]) -> None:
    """A PostgreSQL database and a Redis database for each PostgreSQL configuration: the
    ones named by HUB_BENCH_DATABASE_URL and HUB_BENCH_REDIS_URL when there is one, else
    one each, named and numbered after those."""
    scaled = [config for config in configs if config.backend == "postgres"]
    for n, config in enumerate(scaled):
        config.database_url, config.redis_url = POSTGRES_URL, REDIS_URL
        if len(scaled) > 1:
            parts = urlsplit(POSTGRES_URL)
            path = f"{parts.path}_w{config.workers}{'_against' if config.against else ''}"
            config.database_url = urlunsplit(parts._replace(path=path))
            redis = urlsplit(REDIS_URL)
            number = int(redis.path.lstrip("/") or 0) + n
            config.redis_url = urlunsplit(redis._replace(path=f"/{number}"))


def _child(config: Config, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, *args],
        env={**os.environ, **config.env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def fresh_postgres(url: str) -> None:
    """Drop and create the bench's PostgreSQL database."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def fresh_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def environment(config: Config, data_dir: Path) -> dict[str, str]:
    env = {
        "HUB_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "HUB_LOG_LEVEL": "WARNING",
        "HUB_GRPC_PORT": str(free_port()),
    }
    if config.backend == "postgres":
        env["DATABASE_URL"] = config.database_url
        env["REDIS_URL"] = config.redis_url
    else:
        env["DATABASE_URL"] = f"sqlite:///{data_dir / 'hub.sqlite3'}"
    return env


def line(label: str, r: Result) -> str:
    cpu = ", ".join(
        f"{name} {cores:.2f} cores = {r.cpu_ms_per_call(name):.2f} ms/call"
        for name, cores in r.cores.items()
    )
    return (
        f"{label:<8} c={r.concurrency:<3} {r.rate:8.1f} req/s   p50 {r.pct(50):7.2f} ms   "
        f"p99 {r.pct(99):7.2f} ms   errors {r.errors}   CPU: {cpu}; "
        f"machine {r.machine:.2f} of {os.cpu_count()} cores busy"
    )


def stretches(path: Path) -> dict[str, list[float]]:
    """The hub's timeline lines (see `a2a_core.timeline`) as milliseconds per stretch, in the
    order the calls pass them; the file is emptied."""
    found: dict[str, list[float]] = defaultdict(list)
    if not path.exists():
        return found
    for text in path.read_text().splitlines():
        marks = [(name, int(at)) for name, at in (mark.split(":") for mark in text.split())]
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


def servers(config: Config) -> dict[str, list[int]]:
    """The database's and Redis' own processes serving the hub (PostgreSQL: its backends
    connected to the bench's database; Redis: its server), to count their CPU too."""
    if config.backend != "postgres":
        return {}
    database = urlsplit(config.database_url).path.lstrip("/")
    found: dict[str, list[int]] = {"postgres": [], "redis": []}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if command.startswith("postgres: ") and f" {database} " in command:
            found["postgres"].append(int(entry.name))
        elif command.startswith("redis-server"):
            found["redis"].append(int(entry.name))
    return found


def measured(url: str, pids: dict[str, list[int]], **load: Any) -> Result:
    """One load run, with the CPU each group of processes in `pids` used meanwhile (in cores),
    the load generator's own, and how busy the whole machine was."""

    def used() -> dict[str, float]:
        return {name: sum(cpu_seconds(pid) for pid in group) for name, group in pids.items()}

    before, (busy, elapsed), generated = used(), machine_cpu(), time.process_time()
    began = time.monotonic()
    result = asyncio.run(run_load(url, **load))
    wall = time.monotonic() - began
    result.cores = {name: (cpu - before[name]) / wall for name, cpu in used().items()}
    # The load generator: this process.
    result.cores["load"] = (time.process_time() - generated) / wall
    busy_after, elapsed_after = machine_cpu()
    result.machine = (busy_after - busy) / (elapsed_after - elapsed) * (os.cpu_count() or 1)
    return result


def median_run(runs: list[Result]) -> Result:
    return sorted(runs, key=lambda r: r.rate)[len(runs) // 2]


@dataclass
class Level:
    direct: Result
    hub: Result
    floor: Result | None = None
    runs: list[Result] = field(default_factory=list)  # the hub's, one a round

    @property
    def ratio(self) -> float:
        return self.hub.rate / self.direct.rate


def start(config: Config, args: argparse.Namespace, echo_port: int) -> None:
    """A fresh database for `config`, the echo agent and a caller registered in it, and its
    hub started and warmed up."""
    config.data_dir = Path(tempfile.mkdtemp(prefix="hub-bench-"))
    config.env = environment(config, config.data_dir)
    if config.backend == "postgres":
        fresh_postgres(config.database_url)
        fresh_redis(config.redis_url)
    config.token = _child(config, "--prepare", str(echo_port), str(args.incoming_concurrent))[
        "token"
    ]
    if args.timeline:
        config.timeline = config.data_dir / "timeline.txt"
        config.env["HUB_TIMELINE"] = str(config.timeline)
    hub_port = free_port()
    serve = [
        "manage.py", "a2a", "serve", "--no-demo", "--port", str(hub_port),
        "--workers", str(config.workers), "--server", args.server,
    ]  # fmt: skip
    config.hub = spawn(serve, env=config.env, cwd=config.code)
    wait_for_port(hub_port, config.hub, timeout=60)
    config.url = f"http://127.0.0.1:{hub_port}/a2a/echo/"
    # A first second of calls: every worker's connections are open before measuring.
    asyncio.run(run_load(config.url, concurrency=8, seconds=1, warmup=0, token=config.token))
    if config.timeline:
        stretches(config.timeline)
    config.counted = _child(config, "--count")


def stop(config: Config) -> None:
    if config.hub is not None:
        config.hub.terminate()
        config.hub.wait(30)
    if config.data_dir is not None:
        shutil.rmtree(config.data_dir, ignore_errors=True)


def run_level(
    concurrency: int, configs: list[Config], args: argparse.Namespace
) -> dict[tuple[str, int], Level]:
    """One concurrency level: `--rounds` rounds of the echo agent directly, the floor proxy
    (`--floor`) and each configuration's hub in turn; the medians, printed."""
    directs: list[Result] = []
    floors: list[Result] = []
    throughs: dict[str, list[Result]] = {config.label: [] for config in configs}
    timelines: dict[str, dict[str, list[float]]] = {c.label: defaultdict(list) for c in configs}
    for round_ in range(args.rounds):
        directs.append(
            measured(
                f"http://127.0.0.1:{args.echo_port}/",
                {"echo": [args.echo_pid]},
                concurrency=concurrency,
                seconds=args.seconds,
            )
        )
        if args.floor:
            floors.append(
                measured(
                    f"http://127.0.0.1:{args.floor_port}/",
                    {"proxy": [args.floor_pid], "echo": [args.echo_pid]},
                    concurrency=concurrency,
                    seconds=args.seconds,
                )
            )
        # Every other round the other way round: no configuration always comes last, when the
        # machine has warmed up (or slowed down) the most since the direct run.
        for config in configs if round_ % 2 == 0 else configs[::-1]:
            assert config.hub is not None
            throughs[config.label].append(
                measured(
                    config.url,
                    {"hub": [config.hub.pid], "echo": [args.echo_pid], **servers(config)},
                    concurrency=concurrency,
                    seconds=args.seconds,
                    token=config.token,
                )
            )
            if config.timeline:
                for name, ms in stretches(config.timeline).items():
                    timelines[config.label][name] += ms
    direct = median_run(directs)
    floor = median_run(floors) if floors else None
    print(f"\n== concurrency {concurrency} ==")
    print(line("direct", direct) + f"   (runs: {', '.join(f'{r.rate:.0f}' for r in directs)})")
    if floor is not None:
        print(line("floor", floor) + f"   (runs: {', '.join(f'{r.rate:.0f}' for r in floors)})")
    levels = {}
    for config in configs:
        runs = throughs[config.label]
        config.answered += sum(r.requests - r.errors for r in runs)
        level = levels[config.key] = Level(direct, median_run(runs), floor, runs)
        print(f"-- {config.label} (hub on {args.server})")
        print(line("hub", level.hub) + f"   (runs: {', '.join(f'{r.rate:.0f}' for r in runs)})")
        print(
            f"         ratio hub/direct: throughput {level.ratio:.2f}x, "
            f"p50 +{level.hub.pct(50) - level.direct.pct(50):.2f} ms"
        )
        if level.floor is not None:
            print(floor_line(level))
        if config.timeline:
            print("         the hub's timeline per call:")
            print("\n".join(timeline_lines(timelines[config.label])))
    return levels


def persisted(config: Config) -> str:
    after = _child(config, "--count")
    return (
        f"persisted, {config.label}: {after['tasks'] - config.counted['tasks']} tasks and "
        f"{after['messages'] - config.counted['messages']} messages (the hub answered at "
        f"least {config.answered} calls during measurement, plus warmups)"
    )


def floor_line(level: Level) -> str:
    """Where the hub's cost splits: the SDK's server and client (the floor), and the rest."""
    floor = level.floor
    assert floor is not None
    return (
        f"         the a2a-sdk floor: floor/direct {floor.rate / level.direct.rate:.2f}x "
        f"(p50 +{floor.pct(50) - level.direct.pct(50):.2f} ms), hub/floor "
        f"{level.hub.rate / floor.rate:.2f}x (p50 +{level.hub.pct(50) - floor.pct(50):.2f} ms); "
        f"CPU per call: proxy {floor.cpu_ms_per_call('proxy'):.2f} ms, "
        f"hub {level.hub.cpu_ms_per_call('hub'):.2f} ms"
    )


def floors(results: dict[tuple[str, int], dict[int, Level]]) -> list[str]:
    """What a bare a2a-sdk proxy reached beside the targets' levels (with `--floor`): the
    most any hub built on the SDK could, on this machine. One proxy serves every level's
    rounds, whatever the configurations."""
    out = []
    for concurrency in (1, 16):
        level = next(
            (levels[concurrency] for levels in results.values() if concurrency in levels), None
        )
        if level is None or level.floor is None:
            continue
        out.append(
            f"c={concurrency}: a bare a2a-sdk proxy {level.floor.rate / level.direct.rate:.2f}x "
            f"direct, p50 +{level.floor.pct(50) - level.direct.pct(50):.2f} ms"
        )
    return out


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def by_round(ratios: list[float]) -> str:
    """The ratio of two configurations in each round (loaded in the same minutes): how far
    the median can be trusted."""
    return "per round " + " / ".join(f"{r:.2f}x" for r in ratios)


NEEDS = "        needs: "


def needs(now: Result, wanted: float, hubs: int) -> str:
    """What `wanted` calls/s asks of this machine's CPU, beside what a call cost in `now`: every
    process's CPU per call must fit in the machine's cores (the load generator's included),
    and the hub's in its `hubs` processes, at most a core each (one interpreter lock each)."""
    cores = os.cpu_count() or 1
    processes = "one process, a core at most" if hubs == 1 else f"{hubs} processes, a core each"
    return (
        f"{wanted:.0f} calls/s needs under {cores * 1000 / wanted:.2f} ms of CPU a call in all "
        f"on the machine's {cores} cores (now {now.machine / now.rate * 1000:.2f}) and under "
        f"{hubs * 1000 / wanted:.2f} ms in the hub's {processes} (now "
        f"{now.cpu_ms_per_call('hub'):.2f}, the hub using {now.cores['hub']:.2f} of a core)"
    )


def targets(results: dict[tuple[str, int], dict[int, Level]]) -> list[str]:
    """Every target this run has the figures for, as a line each; under each throughput
    target not met, what it needs of the CPU (`needs`)."""
    out = []
    embedded = results.get(("sqlite", 1), {})
    scaled = results.get(("postgres", 1), {})
    two = results.get(("postgres", 2), {})
    if 16 in embedded:
        ratio = embedded[16].ratio
        out.append(f"embedded, c=16: hub >= 0.8x direct -> {verdict(ratio >= 0.8)} ({ratio:.2f}x)")
        if ratio < 0.8:
            out.append(NEEDS + needs(embedded[16].hub, 0.8 * embedded[16].direct.rate, 1))
    if 1 in embedded:
        added = embedded[1].hub.pct(50) - embedded[1].direct.pct(50)
        out.append(f"embedded, c=1: hub adds < 1 ms p50 -> {verdict(added < 1)} (+{added:.2f} ms)")
    if 16 in embedded and embedded[16].floor is not None:
        level = embedded[16]
        assert level.floor is not None
        cpu, proxy = level.hub.cpu_ms_per_call("hub"), level.floor.cpu_ms_per_call("proxy")
        out.append(
            f"embedded, c=16: hub CPU per call <= 1.5x the bare a2a-sdk proxy's -> "
            f"{verdict(cpu <= 1.5 * proxy)} ({cpu / proxy:.2f}x: {cpu:.2f} vs {proxy:.2f} ms)"
        )
    if 1 in embedded and embedded[1].floor is not None:
        level = embedded[1]
        assert level.floor is not None
        hub_adds = level.hub.pct(50) - level.direct.pct(50)
        proxy_adds = max(level.floor.pct(50) - level.direct.pct(50), 1e-6)
        out.append(
            f"embedded, c=1: p50 the hub adds <= 2x what the bare proxy adds -> "
            f"{verdict(hub_adds <= 2 * proxy_adds)} ({hub_adds / proxy_adds:.2f}x: "
            f"+{hub_adds:.2f} vs +{proxy_adds:.2f} ms)"
        )
    if 16 in scaled:
        ratio = scaled[16].ratio
        out.append(
            f"PostgreSQL + Redis, 1 worker, c=16: hub >= 0.5x direct -> "
            f"{verdict(ratio >= 0.5)} ({ratio:.2f}x)"
        )
        if ratio < 0.5:
            out.append(NEEDS + needs(scaled[16].hub, 0.5 * scaled[16].direct.rate, 1))
        if 16 in embedded:
            cpu = scaled[16].hub.cpu_ms_per_call("hub")
            base = embedded[16].hub.cpu_ms_per_call("hub")
            rounds = [
                a.cpu_ms_per_call("hub") / b.cpu_ms_per_call("hub")
                for a, b in zip(scaled[16].runs, embedded[16].runs, strict=True)
            ]
            out.append(
                f"PostgreSQL + Redis, 1 worker, c=16: hub CPU per call <= 1.2x embedded's -> "
                f"{verdict(cpu <= 1.2 * base)} ({cpu / base:.2f}x: {cpu:.2f} vs {base:.2f} ms; "
                f"{by_round(rounds)})"
            )
    if 64 in scaled and 64 in two:
        ratio = two[64].hub.rate / scaled[64].hub.rate
        rounds = [a.rate / b.rate for a, b in zip(two[64].runs, scaled[64].runs, strict=True)]
        out.append(
            f"PostgreSQL + Redis, c=64: 2 workers >= 1.3x the calls/s of 1 -> "
            f"{verdict(ratio >= 1.3)} ({ratio:.2f}x: {two[64].hub.rate:.0f} vs "
            f"{scaled[64].hub.rate:.0f} req/s; {by_round(rounds)})"
        )
        if ratio < 1.3:
            out.append(NEEDS + needs(two[64].hub, 1.3 * scaled[64].hub.rate, 2))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating direct/hub runs per level"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--backend", nargs="+", choices=["sqlite", "postgres"], default=["sqlite"])
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[1],
        help="hub processes with PostgreSQL (`a2a serve --workers`); SQLite runs one",
    )
    parser.add_argument("--server", choices=["daphne", "uvicorn"], default="uvicorn")
    parser.add_argument(
        "--incoming-concurrent",
        default="default",
        help="the policy's calls at once per agent: a number, or none (default: the policy's default)",
    )
    parser.add_argument(
        "--timeline", action="store_true", help="print where a call's time goes in the hub"
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="DIR",
        help="also run each configuration from the hub's code at DIR, in turn with the others",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also load a bare a2a-sdk proxy (bench/floor_proxy.py) each round",
    )
    parser.add_argument("--prepare", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--count", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare:
        return prepare(int(args.prepare[0]), args.prepare[1])
    if args.count:
        return count()
    if args.against and not (args.against / "manage.py").is_file():
        parser.error(f"--against {args.against}: no checkout of the hub there (no manage.py)")

    configs = [
        Config(backend, workers, code)
        for backend in args.backend
        for workers in (args.workers if backend == "postgres" else [1])
        for code in ([ROOT, args.against.resolve()] if args.against else [ROOT])
    ]
    stores(configs)
    echo_port = args.echo_port = free_port()
    echo = spawn(["bench/echo_agent.py", str(echo_port)])
    args.echo_pid = echo.pid
    floor = None
    if args.floor:
        args.floor_port = free_port()
        floor = spawn(["bench/floor_proxy.py", str(args.floor_port), str(echo_port)])
        args.floor_pid = floor.pid
    print(
        f"SendMessage, {args.seconds:g} s per run x {args.rounds} rounds per level; "
        f"incomingConcurrent: {args.incoming_concurrent}"
    )
    results: dict[tuple[str, int], dict[int, Level]] = defaultdict(dict)
    try:
        wait_for_port(echo_port, echo)
        if floor is not None:
            wait_for_port(args.floor_port, floor)
        for config in configs:
            start(config, args, echo_port)
        for concurrency in args.concurrency:
            for key, level in run_level(concurrency, configs, args).items():
                results[key][concurrency] = level
        print()
        for config in configs:
            print(persisted(config))
    finally:
        for config in configs:
            stop(config)
        for server in (echo, floor):
            if server is not None:
                server.terminate()
                server.wait(10)
    print()
    for text in targets(results):
        print(text if text.startswith(NEEDS) else f"target: {text}")
    for text in floors(results):
        print(f"floor: {text}")


if __name__ == "__main__":
    main()
