"""`a2a serve --workers 2`: a worker that dies is replaced while the other keeps serving; the
hub stops on a deliberate signal, or gives up, saying why, when workers die as they start."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from tests.a2a_core.cli.helpers import MANAGE, cli_environment
from tests.a2a_core.cli.test_serve_workers import LISTEN, owner_counts, sockets_on
from tests.a2a_core.demo.helpers import children_of, running
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)


class Scaled:
    """`manage.py a2a serve --workers 2 --no-demo` in its own process; what it prints is
    kept in a file (`output`); `env` adds to its environment."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "serve.log"
        redis_url = settings.REDIS_URL or os.environ.get(
            "HUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"
        )
        command = [*MANAGE, "a2a", "serve", "--workers", "2", "--no-demo", "--port", str(self.port)]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                env={**cli_environment(), "REDIS_URL": redis_url, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                # A group of its own: whatever is left of it at the end is killed at once.
                start_new_session=True,
            )

    @property
    def output(self) -> str:
        return self.log.read_text()

    def workers(self) -> tuple[list[int], int]:
        """(the running workers' pids, how many of them listen on the port)."""
        workers = [pid for pid in children_of(self.process.pid) if running(pid)]
        try:
            listening = owner_counts(workers, sockets_on(self.port, LISTEN))
        except FileNotFoundError:  # one exited meanwhile
            return workers, 0
        return workers, len(listening)

    def listening_workers(self, within: float = 60) -> list[int]:
        """The two workers' pids, once both listen on the port."""
        deadline = time.monotonic() + within
        while True:
            assert self.process.poll() is None, f"a2a serve exited: {self.output}"
            workers, listening = self.workers()
            if len(workers) == 2 and listening == 2:
                return workers
            assert time.monotonic() < deadline, "the two workers did not both listen"
            time.sleep(0.1)


@pytest.fixture
def scaled(transactional_db: None, tmp_path: Path) -> Iterator[Scaled]:
    hub = Scaled(tmp_path)
    yield hub
    with contextlib.suppress(ProcessLookupError):
        os.killpg(hub.process.pid, signal.SIGKILL)
    hub.process.wait(10)


def test_a_killed_worker_is_replaced_and_the_other_answers_meanwhile(scaled):
    doomed, survivor = scaled.listening_workers()
    os.kill(doomed, signal.SIGKILL)
    while running(doomed):
        time.sleep(0.05)

    # Every request from now on is answered: by the survivor until the replacement listens.
    answered = 0
    deadline = time.monotonic() + 60
    with httpx.Client(timeout=10) as http:
        while True:
            # A new connection for each request, so the kernel picks a worker each time.
            response = http.get(
                f"{scaled.url}/.well-known/agent-card.json", headers={"Connection": "close"}
            )
            assert response.status_code == 200
            answered += 1
            assert scaled.process.poll() is None, f"a2a serve exited: {scaled.output}"
            workers, listening = scaled.workers()
            if listening == 2 and doomed not in workers and survivor in workers:
                break
            assert time.monotonic() < deadline, f"no worker replaced {doomed}: {scaled.output}"
    assert answered > 0
    assert f"worker {doomed} was killed by SIGKILL" in scaled.output

    replacement = next(pid for pid in workers if pid != survivor)
    scaled.process.send_signal(signal.SIGTERM)
    assert scaled.process.wait(30) == 0
    assert not [pid for pid in (survivor, replacement) if running(pid)], "a worker outlived serve"


def test_workers_that_die_as_they_start_make_it_give_up_and_say_why(scaled):
    scaled.listening_workers()
    # Every worker dies as soon as it appears, as one whose start keeps failing does.
    killed: set[int] = set()
    deadline = time.monotonic() + 120
    while scaled.process.poll() is None:
        for pid in children_of(scaled.process.pid):
            if pid not in killed and running(pid):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        assert time.monotonic() < deadline, f"a2a serve did not give up: {scaled.output}"
        time.sleep(0.05)

    assert scaled.process.returncode == 2
    assert "workers died within 10 s of starting 5 times in a row" in scaled.output
    assert "(the last was killed by SIGKILL)" in scaled.output
    assert len(killed) >= 5
    assert not [pid for pid in killed if running(pid)]
