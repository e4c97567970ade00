"""HTTP routing in front of Django, and the process's startup/shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from a2a_core import events, timeline

A2A_PREFIXES = ("/a2a/", "/.well-known/", "/discover", "/metrics", "/inbox/", "/receipts/")


class HubHttpRouter:
    """Sends agents' traffic to the A2A app, static files to disk, and the rest to Django;
    refuses first a request whose headers are over the hub's limits (`gate`)."""

    def __init__(self, django_app: Callable[..., Awaitable[None]]) -> None:
        from a2a_core.protocol.app import build_agent_app
        from a2a_core.protocol.gate import refuse_oversized_headers

        self.refuse_oversized_headers = refuse_oversized_headers
        self.django_app = django_app
        self.a2a_app = build_agent_app()
        # The project's static files and the admin's, straight from their packages (no
        # collectstatic step for the embedded hub).
        self.static_app = StaticFiles(
            directory=settings.BASE_DIR / "static",
            packages=[("django.contrib.admin", "static")],
            check_dir=False,
        )
        self._started = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._started:
            # daphne does not speak the ASGI lifespan protocol: start on the first request.
            self._started = True
            await startup()
        if scope["type"] == "http" and await self.refuse_oversized_headers(scope, send):
            return
        path: str = scope["path"]
        if path.startswith(A2A_PREFIXES) or path == "/a2a":
            marks = timeline.begin() if timeline.ON else None
            await self.a2a_app(scope, receive, send)
            if marks is not None:
                timeline.end(marks)
            return
        if path.startswith(settings.STATIC_URL):
            scope = dict(scope, path=path[len(settings.STATIC_URL) - 1 :], root_path="")
            await self.static_app(scope, receive, send)
            return
        await self.django_app(scope, receive, send)


class StartedFirst:
    """Runs the process's startup (idempotent) before a websocket app: daphne does not speak
    the lifespan protocol, and a websocket may arrive before any HTTP request."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await startup()
        await self.app(scope, receive, send)


async def startup() -> None:
    from a2a_core import runtime
    from a2a_core.protocol import grpc_binding

    await events.bind_to_running_loop()
    await runtime.start()
    if grpc_binding.enabled():
        await grpc_binding.start()


async def shutdown() -> None:
    from a2a_core import runtime
    from a2a_core.delivery.endpoint import close_forwarder
    from a2a_core.delivery.pump import stop_pumps
    from a2a_core.protocol import grpc_binding
    from a2a_core.storage.writers import writer

    await grpc_binding.stop()
    await runtime.stop()
    await stop_pumps()
    await close_forwarder()
    await events.unbind()
    await asyncio.to_thread(writer().close_connections)


async def lifespan_app(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI lifespan protocol (uvicorn speaks it; daphne starts on the first request)."""
    while True:
        message: Any = await receive()
        if message["type"] == "lifespan.startup":
            await startup()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return
