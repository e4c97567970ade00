"""Keeping `a2a serve`'s hub processes running: a worker that dies is started again.

Every worker listens on the port itself (SO_REUSEPORT), so while one is down the kernel gives
new connections to the others: the hub keeps answering, and a replacement joins when it has
started. Replacements are spaced out (0.25 s, doubling with each failed start in a row) so
that a worker that cannot start does not spin. When workers die soon after they start, time after time, restarting
cannot help (a bad setting, a broken install): the supervisor gives up and says so.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from a2a_core.backoff import backoff

FIRST_DELAY = 0.25
# A worker that lived this long had started: its death is not a failed start.
STARTED_AFTER = 10.0
# Failed starts in a row (of one worker's place) before the supervisor gives up.
GIVE_UP_AFTER = 5


class GaveUp(Exception):
    """Workers keep dying as they start; the message says how."""


def how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


@dataclass
class _Place:
    """One worker's place: its process (None while a replacement waits to start)."""

    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failed_starts: int = 0
    restart_at: float = 0.0


class Supervisor:
    """Runs `count` processes made by `start`; `check()` (called every fraction of a second)
    replaces those that died. `say` reports each death; `on_death(pid)` is told of it."""

    def __init__(
        self,
        start: Callable[[], subprocess.Popen[bytes]],
        count: int,
        *,
        say: Callable[[str], None],
        on_death: Callable[[int], None] | None = None,
    ) -> None:
        self._start = start
        self._say = say
        self._on_death = on_death
        self._places = [_Place() for _ in range(count)]
        self._stopping = False

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        return [place.process for place in self._places if place.process is not None]

    def start(self) -> None:
        for place in self._places:
            self._launch(place)

    def _launch(self, place: _Place) -> None:
        place.process = self._start()
        place.started = time.monotonic()

    def check(self) -> None:
        """Replace the workers that died and whose delay is over. Raises `GaveUp` when one
        place's workers failed to start GIVE_UP_AFTER times in a row."""
        if self._stopping:
            return
        now = time.monotonic()
        for place in self._places:
            process = place.process
            if process is None:
                if now >= place.restart_at:
                    self._launch(place)
                continue
            if process.poll() is None:
                continue
            lived = now - place.started
            how = how_it_ended(process.returncode)
            place.process = None
            if self._on_death is not None:
                self._on_death(process.pid)
            place.failed_starts = place.failed_starts + 1 if lived < STARTED_AFTER else 0
            if place.failed_starts >= GIVE_UP_AFTER:
                raise GaveUp(
                    f"workers died within {STARTED_AFTER:g} s of starting {GIVE_UP_AFTER} "
                    f"times in a row (the last {how}); restarting them does not help. "
                    "The workers' own messages, above, say why they stopped"
                )
            delay = backoff(place.failed_starts, FIRST_DELAY)
            place.restart_at = now + delay
            self._say(
                f"  worker {process.pid} {how} {lived:.1f} s after it started; "
                f"another starts in {delay:g} s"
            )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every worker (SIGTERM, then SIGKILL after `timeout`); none is replaced."""
        self._stopping = True
        processes = self.processes
        for process in reversed(processes):
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + timeout
        for process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
