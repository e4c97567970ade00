"""`a2a serve --workers N`: every worker takes a share of one caller's pooled connections, and
keeps them open while the caller's client does."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings

from tests.a2a_core.cli.helpers import MANAGE, cli_environment
from tests.a2a_core.demo.helpers import children_of, running
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)

LISTEN, ESTABLISHED = "0A", "01"


def sockets_on(port: int, state: str) -> set[str]:
    """Inodes of this machine's TCP sockets on local `port` in `state`."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == state:
                inodes.add(fields[9])
    return inodes


def owner_counts(pids: list[int], inodes: set[str]) -> Counter[int]:
    """How many of `inodes` each process holds open."""
    counts: Counter[int] = Counter()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                counts[pid] += 1
    return counts


def ask(connection: socket.socket, port: int) -> None:
    connection.sendall(
        f"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    )


def answer(connection: socket.socket) -> bytes:
    """One whole response read from `connection` (its head and its Content-Length of body);
    what was read so far if the server closed the connection first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def test_one_callers_pooled_connections_are_spread_over_the_workers_and_outlast_idling():
    port = free_port()
    redis_url = settings.REDIS_URL or os.environ.get(
        "HUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"
    )
    command = [*MANAGE, "a2a", "serve", "--workers", "2", "--no-demo", "--port", str(port)]
    serve = subprocess.Popen(
        command,
        env={**cli_environment(), "REDIS_URL": redis_url},
        stdout=subprocess.DEVNULL,
    )
    connections: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            assert serve.poll() is None, f"a2a serve exited with {serve.returncode}"
            workers = children_of(serve.pid)
            listening = owner_counts(workers, sockets_on(port, LISTEN))
            if len(workers) == 2 and len(listening) == 2:
                break
            assert time.monotonic() < deadline, "the two workers did not both listen"
            time.sleep(0.2)

        # A caller opening its pool in a burst, keeping every connection alive.
        for _ in range(16):
            connection = socket.create_connection(("127.0.0.1", port), timeout=10)
            ask(connection, port)
            connections.append(connection)
        for connection in connections:
            assert answer(connection).startswith(b"HTTP/1.1 200")

        served = owner_counts(workers, sockets_on(port, ESTABLISHED))
        assert sum(served.values()) == 16
        assert set(served) == set(workers), f"connections per worker: {dict(served)}"

        # Idle past the 5 s after which the a2a-sdk's client (httpx) gives a connection up:
        # the hub has not closed any, so no call sent on one meets a close on the way.
        time.sleep(6)
        for connection in connections:
            ask(connection, port)
        assert [answer(connection)[:12] for connection in connections] == [b"HTTP/1.1 200"] * 16
    finally:
        for connection in connections:
            connection.close()
        serve.send_signal(signal.SIGINT)
        serve.wait(30)
    assert not [pid for pid in workers if running(pid)], "a worker outlived serve"
