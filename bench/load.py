"""A small closed-loop load generator for JSON-RPC SendMessage, and process helpers."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process on port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def spawn(
    args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=None,
    )


def serve_hub(port: int, env: dict[str, str], *options: str) -> subprocess.Popen[bytes]:
    """The hub as `a2a serve` runs it: uvicorn, one worker, on `port`; `options` are more of
    uvicorn's."""
    return spawn(
        [
            *("-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port)),
            *("--log-level", "warning", "--no-access-log", "--workers", "1"),
            *options,
            "config.asgi:application",
        ],
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
    )


def stop(*procs: subprocess.Popen[bytes] | None) -> None:
    """Terminate each process started (None: not started), killing any that lingers."""
    for proc in procs:
        if proc is None:
            continue
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _stat(pid: int | str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process and its descendants (a server's workers) have used
    so far; NaN where /proc is missing."""
    if _stat(pid) is None:
        return float("nan")
    stats = {
        int(entry.name): _stat(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
    }
    tree, total = {pid}, 0.0
    while grown := {
        child
        for child, fields in stats.items()
        if child not in tree and fields is not None and int(fields[1]) in tree
    }:
        tree |= grown
    for member in tree:
        fields = stats.get(member)
        if fields is not None:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def machine_cpu() -> tuple[float, float]:
    """(busy, elapsed) CPU seconds of the whole machine so far, all cores (from /proc/stat):
    busy is everything but idle and I/O wait; NaN where /proc is missing."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return float("nan"), float("nan")
    ticks = os.sysconf("SC_CLK_TCK")
    # guest time is counted inside user time already
    total = sum(fields[:8])
    idle = fields[3] + fields[4]
    return (total - idle) / ticks, total / ticks


@dataclass
class Result:
    concurrency: int
    requests: int
    errors: int
    seconds: float
    latencies_ms: list[float]
    # process name -> cores it used during the run (CPU seconds per second)
    cores: dict[str, float] = field(default_factory=dict)
    # the whole machine's cores busy during the run (every process, the load generator's too)
    machine: float = float("nan")

    def cpu_ms_per_call(self, name: str) -> float:
        return self.cores[name] / self.rate * 1000 if self.rate else float("nan")

    @property
    def rate(self) -> float:
        """Answered calls per second: an error is not throughput."""
        return (self.requests - self.errors) / self.seconds

    def pct(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


_counter = itertools.count()


def send_message_body(text: str) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": next(_counter),
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
        },
    }


async def run_load(
    url: str,
    *,
    concurrency: int,
    seconds: float,
    warmup: float = 1.0,
    token: str = "",
    text: str = "hello hub",
) -> Result:
    """`concurrency` workers each send SendMessage (saying `text`) back to back for `seconds`
    (after a warmup).

    aiohttp rather than httpx: httpx's pool re-checks every idle connection on each request,
    which at 64 connections makes the load generator, not the server, the bottleneck.
    """
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    latencies: list[float] = []
    errors = 0
    count = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
        loop = asyncio.get_running_loop()
        start = loop.time()
        measure_from = start + warmup
        stop_at = measure_from + seconds

        async def worker() -> None:
            nonlocal errors, count
            while True:
                began = loop.time()
                if began >= stop_at:
                    return
                try:
                    async with session.post(
                        url, data=json.dumps(send_message_body(text))
                    ) as response:
                        body = await response.json()
                        ok = response.status == 200 and "result" in body
                except (aiohttp.ClientError, ValueError):
                    ok = False
                ended = loop.time()
                if began >= measure_from:
                    count += 1
                    latencies.append((ended - began) * 1000)
                    if not ok:
                        errors += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return Result(concurrency, count, errors, seconds, latencies)
