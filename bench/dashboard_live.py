"""Live dashboards: from a committed message to its row in 100 open traffic pages.

    python bench/dashboard_live.py [--rate 200] [--seconds 10] [--sockets 100]

One run: a fresh database (SQLite, or the empty PostgreSQL database DATABASE_URL names: one
that holds a hub already is refused; in-memory channel layer unless REDIS_URL is set), the bench echo agent and the hub (uvicorn, one worker, as `a2a serve` runs
it) as separate processes, a policy whose limits are out of reach, and a viewer who logs in
through the login form. A listener process then opens the dashboard's websocket
(`/ws/dashboard/?page=traffic`, with the session cookie and the hub's own Origin, as a
browser does, offering permessage-deflate as browsers do; the hub declines it) `--sockets`
times, and notes when each feed row (`data-message="<pk>"`) reaches each socket. Meanwhile
SendMessage calls go to the echo agent through the hub at a steady rate (open loop), each with
a unique message id, for `--seconds`. Each call stores two messages — the request and the
echo agent's reply — and ends a task, which the feed shows too: `--rate 200` messages per
second is 100 calls per second and 300 feed rows per second.

Per (message, socket) pair the latency is the row's arrival minus the message's `created_at`
as stored (set just before its transaction commits, so the figure errs on the long side;
same machine, same clock). Every message the window stored counts: requests and the echo
agent's replies. Printed: p50/p99/max over all pairs, frames and kilobytes per second per
socket, rows per frame, pairs that never arrived, and the calls' own p50/p99; first with one
socket (the baseline), then with all of them, then the ratio of their p99s and the verdict
against the target (p99 under 25 ms with 100 sockets). Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import re
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
import websockets
from load import Result, cpu_seconds, free_port, serve_hub, spawn, stop, wait_for_port
from throughput import prepare_hub
from websockets.typing import Origin

USERNAME = "bench-viewer"
PASSWORD = "bench-viewer-password-2026"
TARGET_MS = 25.0
ROW = re.compile(rb'data-message="(\d+)"')
# Calls in flight at most; past it the hub is not keeping up and the open loop queues.
MAX_IN_FLIGHT = 256


def prepare(data_dir: Path, echo_port: int) -> tuple[dict[str, str], str]:
    """Fresh database, echo agent and caller registered, limits out of reach, a viewer."""
    env, token = prepare_hub(data_dir, echo_port)
    from django.db import connections

    from a2a_core.services.users import user_create

    user_create(username=USERNAME, password=PASSWORD, role="viewer")
    connections.close_all()
    return env, token


async def log_in(hub: str) -> str:
    """Log the viewer in through the login form; return the session's Cookie header."""
    jar = aiohttp.CookieJar(unsafe=True)  # cookies from 127.0.0.1
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        async with http.get(f"{hub}/login/") as response:
            response.raise_for_status()
        csrf = next(c.value for c in jar if c.key == "csrftoken")
        form = {"username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": csrf}
        async with http.post(f"{hub}/login/", data=form, allow_redirects=False) as response:
            if response.status != 302:
                raise RuntimeError(f"login failed: {response.status} {await response.text()}")
        return "; ".join(f"{c.key}={c.value}" for c in jar)


# --- the listener process: the open dashboards ---------------------------------------------


@dataclass
class Seen:
    """What one socket received: pk -> first arrival (epoch seconds), and its frames."""

    rows: dict[int, float] = field(default_factory=dict)
    frames: int = 0
    row_count: int = 0
    size: int = 0


async def _listen(ws: Any, seen: Seen) -> None:
    async for raw in ws:
        now = time.time()
        data = raw.encode() if isinstance(raw, str) else raw
        pks = ROW.findall(data)
        seen.frames += 1
        seen.size += len(data)
        seen.row_count += len(pks)
        for pk in pks:
            seen.rows.setdefault(int(pk), now)


async def _dashboards(url: str, origin: str, cookie: str, count: int, pipe: Connection) -> None:
    sockets = []
    for _ in range(count):
        sockets.append(
            await websockets.connect(
                url, origin=Origin(origin), additional_headers={"Cookie": cookie}, max_size=None
            )
        )
    seen = [Seen() for _ in sockets]
    listeners = [asyncio.create_task(_listen(ws, s)) for ws, s in zip(sockets, seen, strict=True)]
    pipe.send("ready")
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, pipe.recv)  # "stop"
    for ws in sockets:
        await ws.close()
    await asyncio.gather(*listeners, return_exceptions=True)
    pipe.send([(s.rows, s.frames, s.row_count, s.size) for s in seen])


def dashboards(url: str, origin: str, cookie: str, count: int, pipe: Connection) -> None:
    """Entry point of the listener process."""
    asyncio.run(_dashboards(url, origin, cookie, count, pipe))


# --- the load ------------------------------------------------------------------------------


def send_body(message_id: str, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": message_id,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
        },
    }


async def produce(hub: str, token: str, rate: float, seconds: float, run: str) -> Result:
    """SendMessage to the echo agent at `rate` per second for `seconds`, open loop."""
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
    connector = aiohttp.TCPConnector(limit=MAX_IN_FLIGHT)
    call_ms: list[float] = []
    errors = 0
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
        loop = asyncio.get_running_loop()

        async def call(i: int) -> None:
            nonlocal errors
            began = loop.time()
            message_id = f"{run}-{i}"
            try:
                async with session.post(
                    f"{hub}/a2a/echo/", json=send_body(message_id, f"{message_id} hello")
                ) as response:
                    answer = await response.json()
                    ok = response.status == 200 and "result" in answer
            except (aiohttp.ClientError, ValueError):
                ok = False
            errors += not ok
            call_ms.append((loop.time() - began) * 1000)

        start = loop.time()
        calls = []
        for i in range(round(rate * seconds)):
            delay = start + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            calls.append(asyncio.create_task(call(i)))
        await asyncio.gather(*calls)
    return Result(MAX_IN_FLIGHT, len(call_ms), errors, seconds, call_ms)


def stored_since(moment: float) -> dict[int, float]:
    """pk -> created_at (epoch seconds) of every message stored since `moment`."""
    from datetime import UTC, datetime

    from django.db import connections

    from a2a_core.models import Message

    since = datetime.fromtimestamp(moment, UTC)
    rows = Message.objects.filter(created_at__gte=since).values_list("pk", "created_at")
    found = {pk: created.timestamp() for pk, created in rows}
    connections.close_all()
    return found


@dataclass
class Outcome:
    sockets: int
    latencies_ms: list[float]
    missing: int
    frames_per_second: float
    kb_per_second: float
    rows_per_frame: float
    messages: int
    calls: Result
    sent_rate: float
    # The hub process's CPU use while the messages were sent, in cores.
    hub_cores: float

    def pct(self, p: float) -> float:
        return Result(0, 0, 0, 1, self.latencies_ms).pct(p)


async def scenario(
    hub: str, cookie: str, token: str, sockets: int, args: argparse.Namespace, hub_pid: int
) -> Outcome:
    ws_url = hub.replace("http://", "ws://") + "/ws/dashboard/?page=traffic"
    here, there = multiprocessing.get_context("spawn").Pipe()
    listener = multiprocessing.get_context("spawn").Process(
        target=dashboards, args=(ws_url, hub, cookie, sockets, there), daemon=True
    )
    listener.start()
    loop = asyncio.get_running_loop()
    if await loop.run_in_executor(None, here.recv) != "ready":
        raise RuntimeError("the dashboards did not connect")
    await asyncio.sleep(0.5)  # let every socket join the relay
    began, cpu_before = time.time(), cpu_seconds(hub_pid)
    calls = await produce(hub, token, args.rate / 2, args.seconds, run=uuid.uuid4().hex[:8])
    produced = time.time() - began
    hub_cores = (cpu_seconds(hub_pid) - cpu_before) / produced
    await asyncio.sleep(args.drain)
    here.send("stop")
    seen = await loop.run_in_executor(None, here.recv)
    listener.join(10)

    stored = await loop.run_in_executor(None, stored_since, began - 0.001)
    latencies: list[float] = []
    missing = 0
    frames = rows = size = 0
    for arrivals, socket_frames, socket_rows, socket_size in seen:
        frames += socket_frames
        rows += socket_rows
        size += socket_size
        for pk, created in stored.items():
            arrived = arrivals.get(pk)
            if arrived is None:
                missing += 1
            else:
                latencies.append((arrived - created) * 1000)
    return Outcome(
        sockets=sockets,
        latencies_ms=latencies,
        missing=missing,
        frames_per_second=frames / len(seen) / produced,
        kb_per_second=size / 1000 / len(seen) / produced,
        rows_per_frame=rows / frames if frames else 0.0,
        messages=len(stored),
        calls=calls,
        sent_rate=calls.requests / produced,
        hub_cores=hub_cores,
    )


def report(outcome: Outcome) -> None:
    label = f"{outcome.sockets} socket{'s' if outcome.sockets > 1 else ''}"
    print(
        f"{label:<11} commit->row p50 {outcome.pct(50):6.1f} ms  p99 {outcome.pct(99):6.1f} ms  "
        f"max {max(outcome.latencies_ms, default=float('nan')):6.1f} ms  "
        f"(pairs {len(outcome.latencies_ms)}, never arrived {outcome.missing})   "
        f"frames/s/socket {outcome.frames_per_second:5.1f}  rows/frame {outcome.rows_per_frame:5.1f}  "
        f"KB/s/socket {outcome.kb_per_second:5.0f}   "
        f"sent {outcome.sent_rate:5.1f} calls/s, {outcome.messages} messages stored, "
        f"call p50 {outcome.calls.pct(50):.1f} ms p99 {outcome.calls.pct(99):.1f} ms, "
        f"errors {outcome.calls.errors}, hub CPU {outcome.hub_cores:.2f} cores"
    )


async def run(hub: str, token: str, args: argparse.Namespace, hub_pid: int) -> None:
    cookie = await log_in(hub)
    outcomes = []
    for sockets in (1, args.sockets):
        outcome = await scenario(hub, cookie, token, sockets, args, hub_pid)
        report(outcome)
        outcomes.append(outcome)
    baseline, full = outcomes
    print(f"ratio p99 {full.sockets}/1 sockets: {full.pct(99) / baseline.pct(99):.2f}x")
    verdict = "met" if full.pct(99) < TARGET_MS and not full.missing else "NOT met"
    print(
        f"target: p99 commit->row under {TARGET_MS:g} ms in {full.sockets} dashboards at "
        f"{args.rate:g} msg/s -> {verdict} ({full.pct(99):.1f} ms"
        f"{f', {full.missing} rows never arrived' if full.missing else ''})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rate", type=float, default=200.0, help="messages per second (two per call)"
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--sockets", type=int, default=100)
    parser.add_argument("--drain", type=float, default=2.0, help="seconds to wait for the rest")
    args = parser.parse_args()

    echo_port, port = free_port(), free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="hub-bench-dashboard-"))
    echo = spawn(["bench/echo_agent.py", str(echo_port)])
    hub: subprocess.Popen[bytes] | None = None
    try:
        env, token = prepare(data_dir, echo_port)
        hub = serve_hub(
            port,
            env,
            *("--lifespan", "on", "--ws", "websockets-sansio"),
            *("--ws-per-message-deflate", "false"),
        )
        wait_for_port(echo_port, echo)
        wait_for_port(port, hub)
        database = "PostgreSQL" if "postgres" in env["DATABASE_URL"] else "SQLite"
        layer = "Redis" if os.environ.get("REDIS_URL") else "in-memory layer"
        print(
            f"live dashboards: {args.rate:g} messages/s ({args.rate / 2:g} SendMessage calls/s "
            f"to the echo agent) for "
            f"{args.seconds:g} s, rows to /ws/dashboard/?page=traffic, "
            f"uvicorn x1 + {database} + {layer}"
        )
        asyncio.run(run(f"http://127.0.0.1:{port}", token, args, hub.pid))
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        stop(hub, echo)


if __name__ == "__main__":
    main()
