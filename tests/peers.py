"""Third-party A2A software as real peers: each in a virtual environment of its own, run as a
separate process.

Peers pin their own a2a-sdk (0.3.x, say) or frameworks whose dependencies would clash with the
hub's, so none of them is installed into the hub's environment. `peer_python(name, [...])`
creates `.venv-peers/<name>-<hash of the requirements>` once (from PyPI, like `./hub setup`)
and returns its interpreter; later runs reuse it. `PeerProcess` runs a script of
`tests/peers/` with that interpreter and waits until it listens.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS_DIR = Path(os.environ.get("HUB_PEERS_DIR", ROOT / ".venv-peers"))
SCRIPTS = Path(__file__).resolve().parent / "peer_scripts"

# Every peer the suite runs, pinned: `./hub test` installs them all before pytest starts (a
# first install inside a test would count against its timeout).
PEERS: dict[str, list[str]] = {
    "adk": ["google-adk[a2a]==2.13.0", "uvicorn"],
    "fasta2a": ["fasta2a==2.1.1", "uvicorn"],
    "handler": ["a2a-handler==0.4.0"],
    "maf": ["agent-framework-a2a==1.0.0b261022"],
    "sdk03": ["a2a-sdk[http-server]==0.3.26", "httpx", "uvicorn"],
}


def peer(name: str) -> Path:
    """The interpreter of the peer `name` of PEERS."""
    return peer_python(name, PEERS[name])


def peer_python(name: str, requirements: list[str]) -> Path:
    """The interpreter of a virtual environment holding exactly `requirements` (pip specs).

    Created on first use under a file lock, so concurrent test runs share one install."""
    digest = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:12]
    home = PEERS_DIR / f"{name}-{digest}"
    python = home / "bin" / "python"
    done = home / ".installed"
    if done.exists():
        return python
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    with open(PEERS_DIR / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return python
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", "--clear", str(home)], check=True)
        log = home / "install.log"
        with open(log, "w") as out:
            result = subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "-q",
                    *requirements,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if result.returncode != 0:
            raise RuntimeError(
                f"installing the peer {name} ({' '.join(requirements)}) failed:\n"
                + log.read_text()[-3000:]
            )
        done.write_text("\n".join(requirements))
    return python


class PeerProcess:
    """`tests/peer_scripts/<script>` run by a peer's interpreter, with `args`; `wait_port`
    blocks until something listens on `port` (a server peer)."""

    def __init__(
        self, python: Path, script: str, *args: str, env: dict[str, str] | None = None
    ) -> None:
        self.process = subprocess.Popen(
            [str(python), str(SCRIPTS / script), *args],
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def wait_port(self, port: int, timeout: float = 60) -> PeerProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"peer exited with {self.process.returncode}:\n{self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"peer did not listen on {port}:\n{self.output()}")

    def run(self, timeout: float = 120) -> str:
        """Wait for a client peer to finish; its output (it must exit 0)."""
        try:
            out, _ = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        if self.process.returncode != 0:
            raise RuntimeError(f"peer exited with {self.process.returncode}:\n{out}")
        return out

    def output(self) -> str:
        if self.process.poll() is None:
            return ""
        out, _ = self.process.communicate()
        return out or ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


if __name__ == "__main__":
    for name in PEERS:
        print(f"peer {name}: {peer(name)}", flush=True)
