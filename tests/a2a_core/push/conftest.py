"""A real webhook receiver for push notification tests, and helpers to read what it got."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.servers import ServerThread

# The key the hub signs notifications with (a config's `token`).
TOKEN = "receiver-signing-key-0123456789"


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    answered: int

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


@dataclass
class Webhook:
    """An HTTP server on 127.0.0.1 recording every POST to /hook. It answers with `statuses`
    in turn (with `location` as the redirect target), then 200."""

    statuses: list[int] = field(default_factory=list)
    location: str = ""
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        app = Starlette(routes=[Route("/hook", self._hook, methods=["POST"])])
        self.server = ServerThread(app, lifespan="off").start()
        self.url = f"{self.server.url}/hook"

    async def _hook(self, request: Request) -> Response:
        body = await request.body()
        status = self.statuses.pop(0) if self.statuses else 200
        self.received.append(Received(dict(request.headers), body, status))
        headers = {"Location": self.location} if self.location and 300 <= status < 400 else {}
        return Response(status_code=status, headers=headers)

    @property
    def accepted(self) -> list[Received]:
        return [r for r in self.received if r.answered == 200]

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture
def webhook() -> Iterator[Any]:
    """`webhook(statuses=[500, 500])` -> a running Webhook, stopped after the test."""
    started: list[Webhook] = []

    def start(**kwargs: Any) -> Webhook:
        hook = Webhook(**kwargs)
        started.append(hook)
        return hook

    yield start
    for hook in started:
        hook.stop()


@pytest.fixture
def loopback_allowed(settings):
    """Webhooks on this machine may be targets (they are refused by default)."""
    settings.HUB_PUSH_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.HUB_PUSH_RETRY_SECONDS = 0.05
    return settings


def summary(event: dict[str, Any]) -> tuple[str, str]:
    """A pushed StreamResponse as (kind, state or artifact text)."""
    if "statusUpdate" in event:
        return "status", event["statusUpdate"]["status"]["state"]
    update = event["artifactUpdate"]
    return "artifact", "".join(p.get("text", "") for p in update["artifact"]["parts"])
