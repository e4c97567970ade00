"""`manage.py a2a serve` run as a user runs it: a child process with a hub of its own."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from django.conf import settings

MANAGE = [sys.executable, str(settings.BASE_DIR / "manage.py")]


def environment(data_dir: Path) -> dict[str, str]:
    """A hub of its own: SQLite in `data_dir`, the in-memory channel layer."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "HUB_TEST_BACKEND")
    }
    return {**env, "HUB_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "config.settings"}


def migrate(data_dir: Path) -> Path:
    """Create `data_dir`'s SQLite database, migrated."""
    subprocess.run(
        [*MANAGE, "migrate", "--verbosity", "0"],
        env=environment(data_dir),
        check=True,
        timeout=120,
    )
    return data_dir


def children_of(pid: int) -> list[int]:
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


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _read_lines(stream: Any, into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)
    into.put("")


class Serve:
    """`manage.py a2a serve <args>` in `data_dir`; its stdout is read line by line on a thread
    (`wait_for`), everything read so far is `output`. Use it as a context manager: on leaving,
    a hub still running is killed."""

    def __init__(
        self,
        data_dir: Path,
        *args: str,
        stderr: IO[bytes] | int = subprocess.DEVNULL,
        in_background: bool = False,
    ):
        # `in_background`: started the way a script's `cmd &` starts it, with SIGINT ignored.
        ignore_sigint = (
            (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if in_background else None
        )
        self.process = subprocess.Popen(
            [*MANAGE, "a2a", "serve", *args],
            env=environment(data_dir),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            preexec_fn=ignore_sigint,
            # Its own process group, as a shell gives a command: `interrupt(terminal=True)`.
            process_group=0,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(
            target=_read_lines, args=(self.process.stdout, self.lines), daemon=True
        ).start()

    @property
    def output(self) -> str:
        return "".join(self.seen)

    def wait_for(self, text: str, timeout: float) -> bool:
        """Read lines until one contains `text` (True), or `timeout` or the end (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if not line:
                return False
            self.seen.append(line)
            if text in line:
                return True
        return False

    def line_with(self, text: str) -> str:
        """The first line read so far containing `text`, stripped ("" if none)."""
        return next((line.strip() for line in self.seen if text in line), "")

    def children(self) -> list[int]:
        return children_of(self.process.pid)

    def interrupt(self, timeout: float = 30, *, terminal: bool = False) -> int:
        """SIGINT, then its exit status. `terminal`: as Ctrl-C at a terminal sends it, to every
        process of the group (the hub's workers and the demo agents get it too)."""
        if terminal:
            os.killpg(self.process.pid, signal.SIGINT)
        else:
            self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=timeout)

    def __enter__(self) -> Serve:
        return self

    def __exit__(self, *_: object) -> None:
        if self.process.poll() is None:  # the test failed: leave nothing running
            left = self.children()
            self.process.kill()
            self.process.wait()
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        assert self.process.stdout is not None
        self.process.stdout.close()
