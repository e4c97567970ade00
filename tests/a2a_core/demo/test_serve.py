"""`manage.py a2a serve` with the demo, as a user runs it: it starts, and Ctrl-C stops it all."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.servers import free_port

pytestmark = pytest.mark.live


def _environment(data_dir: Path) -> dict[str, str]:
    """A hub of its own: SQLite in `data_dir`, the in-memory channel layer."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "HUB_TEST_BACKEND")
    }
    return {**env, "HUB_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "config.settings"}


MANAGE = [sys.executable, str(settings.BASE_DIR / "manage.py")]


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a migrated SQLite database, made once for this module."""
    data_dir = tmp_path_factory.mktemp("migrated")
    subprocess.run(
        [*MANAGE, "migrate", "--verbosity", "0"],
        env=_environment(data_dir),
        check=True,
        timeout=120,
    )
    return data_dir


@pytest.fixture
def data_dir(migrated: Path, tmp_path: Path) -> Path:
    """This test's own copy of the migrated data directory."""
    copy = tmp_path / "data"
    shutil.copytree(migrated, copy)
    return copy


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _lines(stream: object, into: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line)
    into.put("")


def _wait_for(lines: queue.Queue[str], text: str, seen: list[str], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            return False
        if not line:
            return False
        seen.append(line)
        if text in line:
            return True
    return False


def test_serve_starts_the_hub_with_the_demo_and_ctrl_c_stops_everything(
    data_dir: Path, tmp_path: Path
):
    port = free_port()
    with (tmp_path / "stderr.txt").open("wb") as stderr:
        serve = subprocess.Popen(
            [*MANAGE, "a2a", "serve", "--port", str(port)],
            env=_environment(data_dir),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_lines, args=(serve.stdout, lines), daemon=True).start()
        seen: list[str] = []
        try:
            assert _wait_for(lines, "demo agents:", seen, 90), "".join(seen)
            assert _wait_for(lines, "director -> ", seen, 30), "".join(seen)
            children = _children_of(serve.pid)
            serve.send_signal(signal.SIGINT)
            code = serve.wait(timeout=30)
        finally:
            if serve.poll() is None:
                serve.kill()
                serve.wait()
            assert serve.stdout is not None
            serve.stdout.close()

    output = "".join(seen)
    errors = (tmp_path / "stderr.txt").read_text()
    assert f"A2A Hub is running: http://127.0.0.1:{port}/" in output
    assert "Log in as  admin / " in output
    assert "demo agents: pm, architect, tester, implementer, ledger, flaky, ping, pong," in output
    assert "(8 endpoint, 5 inbox)" in output
    assert code == 0, errors
    assert len(children) == 3  # the hub, the endpoint agents, the inbox agents
    assert [pid for pid in children if _running(pid)] == []
    assert "Traceback" not in errors, errors


def test_serve_without_the_demo_starts_the_hub_alone(data_dir: Path):
    serve = subprocess.Popen(
        [*MANAGE, "a2a", "serve", "--port", str(free_port()), "--no-demo"],
        env=_environment(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(serve.stdout, lines), daemon=True).start()
    seen: list[str] = []
    try:
        assert _wait_for(lines, "Ctrl-C stops", seen, 90), "".join(seen)
        children = _children_of(serve.pid)
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=30) == 0
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        assert serve.stdout is not None
        serve.stdout.close()

    assert not any("demo agents" in line for line in seen)
    assert len(children) == 1
