"""The dashboard's websocket: only this site's pages, only users with a role, text as text."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import websockets

from a2a_core.asyncdb import db
from a2a_core.services.users import user_create
from tests.a2a_core.protocol.helpers import request, send

pytestmark = pytest.mark.live

PASSWORD = "a-long-test-password-2026"


async def log_in(http: httpx.AsyncClient, username: str) -> None:
    """Log `http` (based at the hub's URL) in through the login form, as a browser does."""
    await http.get("/login/")
    response = await http.post(
        "/login/",
        data={
            "username": username,
            "password": PASSWORD,
            "csrfmiddlewaretoken": http.cookies["csrftoken"],
        },
        headers={"Referer": f"{http.base_url}login/"},
    )
    assert response.status_code == 302, response.text


async def session_cookie(hub_url: str, username: str) -> str:
    """Log in through the login form; return the Cookie header of the session."""
    async with httpx.AsyncClient(base_url=hub_url) as http:
        await log_in(http, username)
        return "; ".join(f"{name}={value}" for name, value in http.cookies.items())


def socket_url(hub_url: str, page: str = "traffic") -> str:
    return hub_url.replace("http://", "ws://") + f"/ws/dashboard/?page={page}"


async def test_a_websocket_from_a_foreign_origin_is_refused(hub):
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    cookie = await session_cookie(hub.url, "vera")
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(
            socket_url(hub.url), origin="http://evil.example", additional_headers={"Cookie": cookie}
        )
    assert refused.value.response.status_code == 403
    async with websockets.connect(
        socket_url(hub.url), origin=hub.url, additional_headers={"Cookie": cookie}
    ):
        pass  # the hub's own pages connect


async def test_a_websocket_from_another_port_or_scheme_of_the_same_host_is_refused(hub):
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    cookie = await session_cookie(hub.url, "vera")
    port = hub.url.rsplit(":", 1)[1]
    for origin in ("http://127.0.0.1:1", f"https://127.0.0.1:{port}", "http://localhost:" + port):
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(
                socket_url(hub.url), origin=origin, additional_headers={"Cookie": cookie}
            )
        assert refused.value.response.status_code == 403, origin
    async with websockets.connect(
        socket_url(hub.url), origin=hub.url, additional_headers={"Cookie": cookie}
    ) as ws:
        await ws.send("{}")  # the hub's own page is connected


async def test_a_websocket_from_an_origin_in_csrf_trusted_origins_is_accepted(hub, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["http://127.0.0.1:1"]
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    cookie = await session_cookie(hub.url, "vera")
    async with websockets.connect(
        socket_url(hub.url), origin="http://127.0.0.1:1", additional_headers={"Cookie": cookie}
    ) as ws:
        await ws.send("{}")


async def test_behind_a_tls_proxy_the_https_origin_is_the_hubs_own(hub, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    cookie = await session_cookie(hub.url, "vera")
    https = hub.url.replace("http://", "https://")
    headers = {"Cookie": cookie, "X-Forwarded-Proto": "https"}
    async with websockets.connect(socket_url(hub.url), origin=https, additional_headers=headers):
        pass
    with pytest.raises(websockets.InvalidStatus):
        await websockets.connect(socket_url(hub.url), origin=hub.url, additional_headers=headers)


async def test_a_websocket_without_a_logged_in_user_with_a_role_is_refused(hub, django_user_model):
    with pytest.raises(websockets.InvalidStatus):
        await websockets.connect(socket_url(hub.url), origin=hub.url)
    await db(lambda: django_user_model.objects.create_user("norole", password=PASSWORD))
    cookie = await session_cookie(hub.url, "norole")
    with pytest.raises(websockets.InvalidStatus):
        await websockets.connect(
            socket_url(hub.url), origin=hub.url, additional_headers={"Cookie": cookie}
        )


async def test_agent_text_with_markup_reaches_the_browser_as_text(hub, sdk):
    await db(user_create, username="vera", password=PASSWORD, role="viewer")
    cookie = await session_cookie(hub.url, "vera")
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    async with websockets.connect(
        socket_url(hub.url), origin=hub.url, additional_headers={"Cookie": cookie}
    ) as ws:
        await asyncio.sleep(0.2)  # the page has joined the live updates
        await send(await sdk("echo", alpha), request("echo <img src=x onerror=alert(1)>"))
        frame = ""
        while "onerror" not in frame:
            frame = await asyncio.wait_for(ws.recv(), 10)
    assert "&lt;img src=x onerror=alert(1)&gt;" in frame
    assert "<img src=x" not in frame
