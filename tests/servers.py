"""Real servers for tests: an ASGI app served by uvicorn on a free loopback port, in a thread."""

from __future__ import annotations

import asyncio
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import uvicorn

from a2a_core.cli.worker import KEEP_ALIVE_SECONDS

_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nothing is bound to, nor the port above it (where a hub serves gRPC
    unless told otherwise); never the same twice in one test process.

    Picked below the kernel's ephemeral range: a port there is never taken by an outgoing
    connection, which a port from `bind(0)` can be between this call and the server's bind
    (a hub's gRPC port, its HTTP port + 1, was taken that way by some client's connection)."""
    high = _ephemeral_low() - 2
    while True:
        port = random.randrange(10_000, high)
        if {port, port + 1} & _handed_out:
            continue
        if _bindable(port) and _bindable(port + 1):
            _handed_out.update((port, port + 1))
            return port


class ServerThread:
    """Serve `app` on 127.0.0.1:`port` until `stop()`; `url` is its base URL."""

    def __init__(self, app: Any, *, port: int | None = None, lifespan: str = "on") -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan=lifespan,
            loop="asyncio",
            ws="websockets-sansio",
            timeout_graceful_shutdown=2,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,  # as `a2a serve`
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, daemon=True, name=f"server-{self.port}"
        )

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class GrpcServerThread:
    """Serve an A2A gRPC servicer (the a2a-sdk's `GrpcHandler`) on 127.0.0.1:`port` in a
    thread with its own event loop, until `stop()`."""

    def __init__(
        self, servicer: Any, *, port: int | None = None, interceptors: list[Any] | None = None
    ) -> None:
        self.servicer = servicer
        self.interceptors = interceptors or []
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._stopped: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"grpc-{self.port}")

    def _run(self) -> None:
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        from a2a.types import a2a_pb2_grpc

        server = grpc.aio.server(interceptors=self.interceptors)
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(self.servicer, server)
        server.add_insecure_port(self.address)
        await server.start()
        self._stopped = asyncio.Event()
        self._started.set()
        await self._stopped.wait()
        await server.stop(0.5)

    def start(self) -> GrpcServerThread:
        self.thread.start()
        if not self._started.wait(15):
            raise RuntimeError(f"gRPC server on port {self.port} did not start")
        return self

    def stop(self) -> None:
        if self._stopped is not None:
            self.loop.call_soon_threadsafe(self._stopped.set)
        self.thread.join(10)
