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


# Every spelling the resolver reads as a loopback, private or link-local address, with the
# address it stands for: refused when the config is created, as a POST would be.
SPELLINGS = {
    "127.1": "127.0.0.1",
    "0x7f000001": "127.0.0.1",
    "2130706433": "127.0.0.1",
    "0177.0.0.1": "127.0.0.1",
    "0x7f.1": "127.0.0.1",
    "localhost.": "127.0.0.1",
    "LOCALHOST": "127.0.0.1",
    "LocalHost..": "127.0.0.1",
    "\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54": "127.0.0.1",  # full-width
    "\u2460\u2461\u2466.0.0.1": "127.0.0.1",  # circled digits: IDNA maps them to 127
    "0": "0.0.0.0",
    "10.1": "10.0.0.1",
    "0xa9fea9fe": "169.254.169.254",
    "2852039166": "169.254.169.254",
}
KINDS = {"127": "loopback", "0.0": "unspecified", "10.": "private", "169": "link-local"}


def refusal(spelling: str, address: str, setting: str = "HUB_PUSH_ALLOWED_HOSTS") -> str:
    """What refusing a webhook at `spelling` says (`address`: what it stands for)."""
    host = spelling.lower().rstrip(".")
    kind = next(kind for start, kind in KINDS.items() if address.startswith(start))
    return (
        f"{host} resolves to {address}, which is a {kind} address; the hub only POSTs to "
        f"public addresses (an operator can allow it with {setting})"
    )
