"""One hub worker process: uvicorn on a listening socket of its own.

    python -m a2a_core.cli.worker HOST PORT

Every worker binds HOST:PORT (and the gRPC port, HOST:PORT+1 unless HUB_GRPC_PORT says
otherwise) with SO_REUSEPORT, so the kernel spreads new connections over
the workers by their addresses. (uvicorn's own `--workers` shares one listening socket:
whichever worker is accepting takes the next connection, and a caller that opens its
connection pool in a burst lands all of it on one worker while the others idle.)
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys

import uvicorn

# How long an idle connection stays open: longer than clients keep theirs. httpx, the
# a2a-sdk's client, expires an idle connection after 5 s, as uvicorn closes one by default,
# so a call sent on a connection idle for about 5 s could cross the hub's close and fail with
# no answer. The server must be the one to close last.
KEEP_ALIVE_SECONDS = 75


def listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def grpc_defaults(host: str, port: int) -> None:
    """gRPC on the HTTP port + 1 and the same host, unless HUB_GRPC_PORT/HUB_GRPC_HOST say
    otherwise (read by the settings, which load after this)."""
    os.environ.setdefault("HUB_GRPC_PORT", str(port + 1))
    os.environ.setdefault("HUB_GRPC_HOST", host)


def run(host: str, port: int) -> None:
    grpc_defaults(host, port)
    config = uvicorn.Config(
        "config.asgi:application",
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="websockets-sansio",
        # Compression is negotiated per socket, so each frame would be compressed once for
        # every open dashboard: with 100 of them that alone tripled the feed's latency.
        # The frames are small HTML, sent at most twenty times a second.
        ws_per_message_deflate=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    uvicorn.Server(config).run(sockets=[listening_socket(host, port)])


if __name__ == "__main__":
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        sys.exit("usage: python -m a2a_core.cli.worker HOST PORT")
    # Ctrl-C at a terminal reaches every process of the group: uvicorn shuts down gracefully,
    # then re-raises it. `a2a serve` says "stopping…"; a traceback here would add nothing.
    with contextlib.suppress(KeyboardInterrupt):
        run(sys.argv[1], int(sys.argv[2]))
