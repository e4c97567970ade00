"""Errors in each interface's own form, on the 1.0 and the 0.3 paths alike; junk never a 5xx."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from a2a_core.asyncdb import db
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.test_bad_input import V1, error_info, rpc, send_params

pytestmark = pytest.mark.live

LEGACY_SEND = {
    "message": {
        "messageId": "legacy-1",
        "role": "user",
        "parts": [{"kind": "text", "text": "echo old"}],
    }
}
LEGACY_REST_SEND = {
    "message": {"messageId": "legacy-2", "role": "ROLE_USER", "content": [{"text": "echo old"}]}
}


@pytest.fixture
async def raw(hub):
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as client:
        yield client


@pytest.fixture
async def tokens(hub) -> dict[str, str]:
    await db(
        policy_publish,
        document={"matrix": [{"caller": "beta", "target": "echo", "action": "deny"}]},
        reason="test",
        actor_label="test",
    )
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    _, beta = await hub.caller("beta")
    return {"alpha": f"Bearer {alpha}", "beta": f"Bearer {beta}"}


@pytest.mark.parametrize("version", ["1.0", "2.0", "banana"])
@pytest.mark.parametrize(
    ("method", "params"),
    [("message/send", LEGACY_SEND), ("message/stream", LEGACY_SEND), ("tasks/get", {"id": "x"})],
)
async def test_a_0_3_method_with_another_version_is_version_not_supported(
    raw, tokens, version, method, params
):
    response = await raw.post(
        "/a2a/echo/",
        json=rpc(method, params, id_="v-1"),
        headers={"Authorization": tokens["alpha"], "A2A-Version": version},
    )
    body = response.json()
    assert body["id"] == "v-1"
    assert body["error"]["code"] == -32009
    assert "0.3" in body["error"]["message"]
    if version != "1.0":
        assert "1.0" in body["error"]["message"]


# "1" * 5000: a version by its grammar whose number Python refuses to read (over 4,300 digits).
@pytest.mark.parametrize("version", ["2.0", "banana", "1" * 5000])
async def test_a_version_nobody_speaks_names_the_supported_ones_over_rest(raw, tokens, version):
    for path, payload in [
        ("/a2a/echo/rest/v1/message:send", LEGACY_REST_SEND),
        ("/a2a/echo/rest/message:send", send_params()),
    ]:
        response = await raw.post(
            path,
            json=payload,
            headers={"Authorization": tokens["alpha"], "A2A-Version": version},
        )
        assert response.status_code == 400
        body = response.json()
        assert error_info(body)["reason"] == "VERSION_NOT_SUPPORTED"
        assert "1.0" in body["error"]["message"] and "0.3" in body["error"]["message"]


async def test_a_0_3_rest_path_with_version_1_0_is_version_not_supported(raw, tokens):
    response = await raw.post(
        "/a2a/echo/rest/v1/message:send",
        json=LEGACY_REST_SEND,
        headers={"Authorization": tokens["alpha"], **V1},
    )
    assert response.status_code == 400
    assert error_info(response.json())["reason"] == "VERSION_NOT_SUPPORTED"
    assert "0.3" in response.json()["error"]["message"]


async def test_a_policy_refusal_has_the_same_code_on_the_0_3_path_as_on_1_0(raw, tokens):
    beta = {"Authorization": tokens["beta"]}
    modern = await raw.post(
        "/a2a/echo/", json=rpc("SendMessage", send_params()), headers={**beta, **V1}
    )
    legacy = await raw.post("/a2a/echo/", json=rpc("message/send", LEGACY_SEND, 5), headers=beta)
    assert modern.json()["error"]["code"] == -32053
    assert legacy.json()["error"]["code"] == -32053
    assert legacy.json()["id"] == 5
    assert legacy.json()["error"]["data"]["reason"] == "denied_by_matrix"


async def test_a_policy_refusal_of_a_0_3_stream_has_the_1_0_code(raw, tokens):
    response = await raw.post(
        "/a2a/echo/",
        json=rpc("message/stream", LEGACY_SEND, "s-9"),
        headers={"Authorization": tokens["beta"]},
    )
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line[:5] == "data:"]
    assert [(e["id"], e["error"]["code"]) for e in events] == [("s-9", -32053)]


async def test_a_policy_refusal_has_the_same_status_over_0_3_rest_as_over_1_0(raw, tokens):
    beta = {"Authorization": tokens["beta"]}
    modern = await raw.post("/a2a/echo/rest/message:send", json=send_params(), headers=beta | V1)
    legacy = await raw.post("/a2a/echo/rest/v1/message:send", json=LEGACY_REST_SEND, headers=beta)
    assert modern.status_code == legacy.status_code == 403
    assert error_info(modern.json())["reason"] == error_info(legacy.json())["reason"]
    assert error_info(legacy.json())["reason"] == "POLICY_REJECTED"


@pytest.mark.parametrize("id_", [7, "req-7"])
@pytest.mark.parametrize("token", [None, "Bearer a2ah_forged"])
async def test_a_401_over_json_rpc_keeps_the_request_id(raw, tokens, id_, token):
    headers = {**V1, **({"Authorization": token} if token else {})}
    response = await raw.post("/a2a/echo/", json=rpc("GetTask", {"id": "x"}, id_), headers=headers)
    assert response.status_code == 401
    assert response.json()["id"] == id_
    assert response.json()["error"]["code"] == -32050


@pytest.mark.parametrize("path", ["/a2a/echo/rest/tasks/x", "/a2a/echo/rest/v1/tasks/x"])
async def test_a_401_over_rest_is_a_google_rpc_status(raw, tokens, path):
    response = await raw.get(path, headers=V1)
    assert response.status_code == 401
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED")
    assert error_info(response.json())["reason"] == "UNAUTHENTICATED"


LONE_SURROGATE_METHODS: list[tuple[str, dict[str, Any]]] = [
    ("SendMessage", send_params()),
    ("SendStreamingMessage", send_params(message_id="raw-2")),
    ("GetTask", {"id": "x"}),
    ("ListTasks", {}),
    ("CancelTask", {"id": "x"}),
    ("SubscribeToTask", {"id": "x"}),
    ("CreateTaskPushNotificationConfig", {"taskId": "x", "url": "http://127.0.0.1:9/"}),
    ("GetTaskPushNotificationConfig", {"taskId": "x", "id": "y"}),
    ("ListTaskPushNotificationConfigs", {"taskId": "x"}),
    ("DeleteTaskPushNotificationConfig", {"taskId": "x", "id": "y"}),
    ("message/send", LEGACY_SEND),
    ("tasks/get", {"id": "x"}),
]


async def test_a_lone_surrogate_id_is_an_invalid_request_and_the_connection_keeps_serving(
    hub, tokens, caplog
):
    caplog.set_level(logging.INFO)
    one_connection = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx.AsyncClient(base_url=hub.url, timeout=30, limits=one_connection) as http:
        for method, params in LONE_SURROGATE_METHODS:
            headers = {"Authorization": tokens["alpha"], "Content-Type": "application/json"}
            if "/" not in method:
                headers.update(V1)
            body = (
                f'{{"jsonrpc": "2.0", "id": "\\ud800", "method": "{method}", '
                f'"params": {json.dumps(params)}}}'
            ).encode()
            response = await http.post("/a2a/echo/", content=body, headers=headers)
            assert response.status_code == 400, (method, response.text)
            assert response.json()["id"] is None
            assert response.json()["error"]["code"] == -32600, method
            # The same connection serves a normal request next.
            follow = await http.post(
                "/a2a/echo/",
                json=rpc("ListTasks", {}, "after"),
                headers={"Authorization": tokens["alpha"], **V1},
            )
            assert follow.status_code == 200 and "result" in follow.json(), method
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


async def test_a_lone_surrogate_in_a_message_is_refused_in_each_binding(raw, tokens):
    headers = {"Authorization": tokens["alpha"], "Content-Type": "application/json", **V1}
    text = b'{"message": {"messageId": "s-1", "role": "ROLE_USER", "parts": [{"text": "\\udfff"}]}}'
    over_rpc = await raw.post(
        "/a2a/echo/",
        content=b'{"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": ' + text + b"}",
        headers=headers,
    )
    assert over_rpc.json()["id"] == 3
    assert over_rpc.json()["error"]["code"] == -32600
    over_rest = await raw.post("/a2a/echo/rest/message:send", content=text, headers=headers)
    assert over_rest.status_code == 400
    assert error_info(over_rest.json())["reason"] == "INVALID_REQUEST"


async def test_junk_from_a_valid_caller_is_a_rate_limited_warning_without_a_traceback(
    raw, tokens, caplog
):
    caplog.set_level(logging.WARNING)
    headers = {"Authorization": tokens["alpha"], **V1}
    junk = [
        (rpc("GetTask", {"id": "x"}, {"not": "an id"}), -32600),
        (rpc("GetTask", {"id": {"not": "a string"}}), -32602),
        (rpc("message/send", {"message": 5}), -32600),
    ]
    for _ in range(30):
        for body, code in junk:
            response = await raw.post("/a2a/echo/", json=body, headers=headers)
            assert response.json()["error"]["code"] == code
    sdk = [r for r in caplog.records if r.name.startswith("a2a.")]
    assert [r.getMessage() for r in sdk if r.levelno >= logging.ERROR] == []
    assert [r.getMessage() for r in sdk if r.exc_info] == []
    unreadable = [r for r in sdk if r.getMessage().startswith("Failed to validate base")]
    assert len(unreadable) <= 10


async def test_a_lone_surrogate_in_an_inbox_frame_is_a_frame_error_not_a_500(hub):
    from tests.a2a_core.inbox.test_inbox_agents import inbox_agent

    _, duc = await inbox_agent("duc")
    async with httpx.AsyncClient(
        base_url=hub.url, headers={"Authorization": f"Bearer {duc}"}, timeout=30
    ) as http:
        for frame in (
            b'{"type": "ack", "ref": "\\ud800", "deliveryIds": ["x"]}',
            b'{"type": "ack", "ref": 1, "deliveryIds": ["\\udc00"]}',
        ):
            response = await http.post("/inbox/duc/", content=frame)
            assert response.status_code == 200, response.text
            assert response.json()["type"] == "error"
            assert "surrogate" in response.text


@pytest.mark.parametrize(
    ("token", "body", "status", "reason"),
    [
        ("beta", LEGACY_REST_SEND, 403, "POLICY_REJECTED"),
        ("alpha", {"message": {"messageId": "m", "role": "ROLE_USER", "content": []}}, 400, None),
        ("alpha", {"message": LEGACY_REST_SEND["message"], "metadata": 5}, 400, None),
    ],
)
async def test_a_0_3_rest_stream_refused_at_once_is_an_error_response_not_a_cut_connection(
    hub, tokens, token, body, status, reason
):
    one_connection = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx.AsyncClient(base_url=hub.url, timeout=30, limits=one_connection) as http:
        headers = {"Authorization": tokens[token]}
        response = await http.post("/a2a/echo/rest/v1/message:stream", json=body, headers=headers)
        assert response.status_code == status, response.text
        assert response.json()["error"]["code"] == status
        if reason:
            assert error_info(response.json())["reason"] == reason
        follow = await http.get("/a2a/echo/rest/v1/tasks/nope", headers=headers)
        assert follow.status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/a2a/echo/rest/tasks?contextId=a%00b",
        "/a2a/echo/rest/tasks?pageToken=a%00b",
        "/a2a/echo/rest/tasks/a%00b",
        "/a2a/echo/rest/v1/tasks/a%00b",
    ],
)
async def test_a_nul_character_in_a_rest_url_is_a_400(raw, tokens, path):
    response = await raw.get(path, headers={"Authorization": tokens["alpha"], **V1})
    assert response.status_code == 400, response.text
    assert error_info(response.json())["reason"] == "INVALID_PARAMS"
