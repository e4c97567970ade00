"""`a2a log --follow`: live traffic through the hub shows up in an auditor's terminal."""

from __future__ import annotations

import asyncio
import json
import queue
import signal
import subprocess
import threading
import time

import pytest

from tests.a2a_core.cli.helpers import MANAGE, cli_environment
from tests.a2a_core.protocol.helpers import request, send

pytestmark = pytest.mark.live


class Follower:
    """`manage.py a2a log --follow ...` in its own process; its lines arrive on a queue."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*MANAGE, "a2a", "log", "--follow", *args],
            env=cli_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def until(self, predicate, timeout: float = 20.0) -> list[str]:
        """Lines read until one satisfies `predicate` (all of them, in order)."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            seen.append(line)
            if predicate(line):
                return seen
        raise AssertionError(f"not seen within {timeout}s; got {seen}")

    def interrupt(self) -> subprocess.CompletedProcess[str]:
        """Ctrl-C, as a user would press it; a process still running after that is killed (so
        it never outlives the test holding the database), and the test fails on its code."""
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            err += "\n(still running 30 s after Ctrl-C; killed)"
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, "", err)


async def test_follow_prints_new_messages_as_they_are_routed_and_stops_on_ctrl_c(hub, sdk):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    _, other_token = await hub.caller("omega")
    client, other = await sdk("echo", token), await sdk("echo", other_token)
    await send(client, request("before following"))

    follower = Follower("--json", "--agent", "alpha")
    try:
        # What was recorded before it started comes first, then it waits for more.
        first = await asyncio.to_thread(
            follower.until, lambda line: "before following" in line, 30.0
        )
        assert all(json.loads(line)["from"] in ("alpha", "echo") for line in first)

        await send(other, request("not alpha's"))
        await send(client, request("live one"))
        await send(client, request("live two"))
        later = await asyncio.to_thread(follower.until, lambda line: "live two" in line)
        said = [json.loads(line)["messageSummary"] for line in later]
        assert said.index("live one") < said.index("live two")
        assert "not alpha's" not in said
        assert said.count("live one") == 1  # shown once, though read again for late commits
    finally:
        done = follower.interrupt()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


async def test_follow_as_a_table_lines_up_with_its_header(hub, sdk):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    follower = Follower("--pair", "alpha:echo")
    try:
        header = await asyncio.to_thread(follower.until, lambda line: line.startswith("TIME"))
        await send(await sdk("echo", token), request("table row"))
        rows = await asyncio.to_thread(follower.until, lambda line: "table row" in line)
        row = rows[-1]
        assert row.split()[2:5] == ["alpha", "echo", "request"]
        assert row.index("alpha") == header[-1].index("FROM")
    finally:
        follower.interrupt()
