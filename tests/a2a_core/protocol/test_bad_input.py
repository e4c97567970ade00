"""Bad input at the A2A endpoints: each gets the spec's error, and nothing is half-written."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, Part, TaskState
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError

from a2a_core.asyncdb import db
from a2a_core.models import Message as MessageRow
from a2a_core.schemas.envelopes import ENVELOPE_EXTENSION, ENVELOPE_MEDIA_TYPE
from a2a_core.services.agents import agent_register
from tests.a2a_core.protocol.helpers import counts, request, send, stored_messages, stored_task
from tests.factories import make_card

pytestmark = pytest.mark.live

V1 = {"A2A-Version": "1.0"}


def rpc(method: str, params: dict[str, Any] | None = None, id_: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}


def send_params(text: str = "echo hi", message_id: str = "raw-1", **message: Any) -> dict[str, Any]:
    return {
        "message": {
            "messageId": message_id,
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            **message,
        }
    }


def error_info(body: dict[str, Any]) -> dict[str, Any]:
    details = body["error"].get("data") or body["error"].get("details") or []
    return next(d for d in details if d["@type"].endswith("ErrorInfo"))


@pytest.fixture
async def raw(hub):
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as client:
        yield client


@pytest.fixture
async def setup(hub):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    return {"Authorization": f"Bearer {token}", **V1}


async def test_malformed_json_is_a_parse_error(raw, setup):
    response = await raw.post("/a2a/echo/", content=b'{"jsonrpc": "2.0", "method": ', headers=setup)
    assert response.json()["error"]["code"] == -32700


async def test_unknown_method_is_method_not_found(raw, setup):
    response = await raw.post("/a2a/echo/", json=rpc("SendMesage", send_params()), headers=setup)
    assert response.json()["error"]["code"] == -32601


# "1" * 5000: a version, by its grammar, whose number Python refuses to read (over 4,300 digits).
@pytest.mark.parametrize("version", ["2.0", "banana", "1" * 5000])
async def test_unsupported_version_header_is_refused(raw, setup, version):
    before = await counts()
    response = await raw.post(
        "/a2a/echo/",
        json=rpc("SendMessage", send_params()),
        headers={**setup, "A2A-Version": version},
    )
    body = response.json()
    assert body["error"]["code"] == -32009
    assert error_info(body)["reason"] == "VERSION_NOT_SUPPORTED"
    assert await counts() == before


async def test_missing_version_header_means_0_3_so_a_1_0_method_is_refused(raw, setup):
    headers = {k: v for k, v in setup.items() if k != "A2A-Version"}
    response = await raw.post("/a2a/echo/", json=rpc("GetTask", {"id": "x"}), headers=headers)
    assert response.json()["error"]["code"] == -32009


async def test_a_0_3_client_is_served_on_the_same_endpoint(raw, setup):
    headers = {k: v for k, v in setup.items() if k != "A2A-Version"}
    legacy = {
        "message": {
            "messageId": "legacy-1",
            "role": "user",
            "parts": [{"kind": "text", "text": "echo old"}],
        }
    }
    response = await raw.post("/a2a/echo/", json=rpc("message/send", legacy), headers=headers)
    result = response.json()["result"]
    assert result["status"]["state"] == "completed"
    assert result["artifacts"][0]["parts"][0]["text"] == "echo: old"


@pytest.mark.parametrize("path", ["/a2a/echo/", "/a2a/echo/rest/tasks/abc"])
async def test_missing_token_is_401_with_the_scheme(raw, setup, path):
    method = raw.post if path.endswith("/") else raw.get
    response = await method(
        path, **({"json": rpc("GetTask", {"id": "abc"})} if path.endswith("/") else {}), headers=V1
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="a2a-hub"'
    assert error_info(response.json())["reason"] == "UNAUTHENTICATED"


async def test_forged_token_is_401_invalid_token(raw, setup):
    response = await raw.post(
        "/a2a/echo/",
        json=rpc("GetTask", {"id": "abc"}),
        headers={**V1, "Authorization": "Bearer a2ah_forged"},
    )
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert response.json()["error"]["code"] == -32050


async def test_a_token_without_the_call_scope_is_403(hub, raw, setup):
    result = await db(agent_register, card=make_card("listener"), scopes=["a2a:receive"])
    response = await raw.post(
        "/a2a/echo/",
        json=rpc("SendMessage", send_params()),
        headers={**V1, "Authorization": f"Bearer {result.token}"},
    )
    assert response.status_code == 403
    assert error_info(response.json())["metadata"]["missingScope"] == "a2a:call"


async def test_calling_an_agent_that_does_not_receive_is_refused(hub, sdk, setup):
    await db(agent_register, card=make_card("mute"), scopes=["a2a:call"])
    _, token = await hub.caller("bob")
    client = await sdk("mute", token)
    before = await counts()
    with pytest.raises(Exception, match="does not accept calls"):
        await send(client, request("echo hi"))
    assert await counts() == before


async def test_unknown_agent_is_404(raw, setup):
    response = await raw.post("/a2a/nobody/", json=rpc("SendMessage", send_params()), headers=setup)
    assert response.status_code == 404
    assert error_info(response.json())["reason"] == "AGENT_NOT_FOUND"


@pytest.mark.parametrize("path", ["/a2a/echo/", "/a2a/echo/rest/message:send"])
async def test_oversized_body_is_413_and_nothing_is_stored(raw, setup, path, settings):
    before = await counts()
    huge = send_params(text="x" * (2 * 1024 * 1024))
    body = rpc("SendMessage", huge) if path.endswith("/") else huge
    response = await raw.post(path, json=body, headers=setup)
    assert response.status_code == 413
    assert error_info(response.json())["reason"] == "PAYLOAD_TOO_LARGE"
    assert "1,048,576" in response.json()["error"]["message"]
    assert await counts() == before


async def test_a_nul_character_anywhere_is_invalid_params_and_nothing_is_stored(raw, setup):
    before = await counts()
    in_text = await raw.post(
        "/a2a/echo/", json=rpc("SendMessage", send_params(text="a\x00b")), headers=setup
    )
    assert in_text.status_code == 400
    assert in_text.json()["error"]["code"] == -32602
    assert "NUL character (U+0000)" in in_text.json()["error"]["message"]
    in_path = await raw.get("/a2a/echo/rest/tasks/%00", headers=setup)
    assert in_path.status_code == 400
    assert "NUL character" in in_path.json()["error"]["message"]
    assert await counts() == before
    # Text that merely spells the escape is ordinary text.
    spelled = await raw.post(
        "/a2a/echo/", json=rpc("SendMessage", send_params(text="a\\u0000b")), headers=setup
    )
    assert "result" in spelled.json(), spelled.text


async def test_too_many_parts_is_invalid_params_naming_the_field(hub, sdk, setup):
    client = await sdk("echo", setup["Authorization"].split()[1])
    before = await counts()
    with pytest.raises(InvalidParamsError) as exc:
        await send(client, request("", parts=[Part(text=str(i)) for i in range(65)]))
    assert "limit is 64" in str(exc.value.data)
    assert await counts() == before


async def test_invalid_envelope_is_refused_with_every_problem_jsonrpc(raw, setup):
    before = await counts()
    params = send_params()
    params["message"]["parts"] = [
        {
            "data": {"kind": "task_response", "payload": {"taskId": "t", "action": "failed"}},
            "mediaType": ENVELOPE_MEDIA_TYPE,
        }
    ]
    params["message"]["extensions"] = [ENVELOPE_EXTENSION]
    body = (await raw.post("/a2a/echo/", json=rpc("SendMessage", params), headers=setup)).json()
    assert body["error"]["code"] == -32602
    violations = next(d for d in body["error"]["data"] if d["@type"].endswith("BadRequest"))[
        "fieldViolations"
    ]
    assert violations == [
        {
            "field": "message.parts[0].data.payload.reason",
            "description": "reason is required when action is 'failed': say why",
        }
    ]
    assert await counts() == before


async def test_invalid_envelope_is_a_400_over_rest(raw, setup):
    params = send_params()
    params["message"]["parts"] = [{"data": {"kind": "nonsense"}, "mediaType": ENVELOPE_MEDIA_TYPE}]
    response = await raw.post("/a2a/echo/rest/message:send", json=params, headers=setup)
    assert response.status_code == 400
    body = response.json()
    violations = next(d for d in body["error"]["details"] if d["@type"].endswith("BadRequest"))[
        "fieldViolations"
    ]
    assert violations[0]["field"] == "message.parts[0].data.kind"
    assert "task_request" in violations[0]["description"]


async def test_valid_envelope_is_recorded_with_its_kind(hub, raw, setup):
    params = send_params(message_id="env-1")
    params["message"]["parts"] = [
        {
            "data": {
                "kind": "question",
                "priority": "high",
                "correlationId": "c-9",
                "payload": {"text": "echo REST or GraphQL?"},
            },
            "mediaType": ENVELOPE_MEDIA_TYPE,
        }
    ]
    response = await raw.post("/a2a/echo/", json=rpc("SendMessage", params), headers=setup)
    task_id = response.json()["result"]["task"]["id"]
    message = (await stored_messages(task_id))[0]
    assert (message.kind, message.correlation_id, message.summary) == (
        "question",
        "c-9",
        "echo REST or GraphQL?",
    )
    assert message.envelope["priority"] == "high"


async def test_spoofed_sender_in_the_envelope_is_refused(raw, setup):
    params = send_params()
    params["message"]["parts"] = [
        {
            "data": {"kind": "notification", "from": "someone-else", "payload": {"text": "hi"}},
            "mediaType": ENVELOPE_MEDIA_TYPE,
        }
    ]
    body = (await raw.post("/a2a/echo/", json=rpc("SendMessage", params), headers=setup)).json()
    assert body["error"]["code"] == -32602
    assert "bearer token belongs to 'alpha'" in json.dumps(body)


async def test_another_pairs_task_is_not_found_everywhere(hub, sdk):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    _, mallory = await hub.caller("mallory")
    mine = await send(await sdk("echo", alpha), request("echo private"))
    theirs = await sdk("echo", mallory)
    with pytest.raises(TaskNotFoundError):
        await theirs.get_task(GetTaskRequest(id=mine.id))
    from a2a.types.a2a_pb2 import CancelTaskRequest, ListTasksRequest, SubscribeToTaskRequest

    with pytest.raises(TaskNotFoundError):
        await theirs.cancel_task(CancelTaskRequest(id=mine.id))
    streaming = await sdk("echo", mallory, streaming=True)
    with pytest.raises(TaskNotFoundError):
        async for _ in streaming.subscribe(SubscribeToTaskRequest(id=mine.id)):
            pass
    assert list((await theirs.list_tasks(ListTasksRequest())).tasks) == []
    before = await counts()
    with pytest.raises(TaskNotFoundError):
        await send(theirs, request("echo hijack", task_id=mine.id))
    assert await counts() == before


async def test_message_to_a_finished_task_is_unsupported(hub, sdk, setup):
    client = await sdk("echo", setup["Authorization"].split()[1])
    done = await send(client, request("echo once"))
    before = await counts()
    with pytest.raises(UnsupportedOperationError, match="terminal state"):
        await send(client, request("echo again", task_id=done.id))
    assert await counts() == before


async def test_context_that_does_not_match_the_task_is_refused(hub, sdk, setup):
    client = await sdk("echo", setup["Authorization"].split()[1])
    asked = await send(client, request("echo hi"))
    await hub.endpoint_agent("asker")
    asker = await sdk("asker", setup["Authorization"].split()[1])
    waiting = await send(asker, request("ask colour?"))
    with pytest.raises(InvalidParamsError) as exc:
        await send(asker, request("blue", task_id=waiting.id, context_id=asked.context_id))
    assert "message.contextId" in str(exc.value.data)
    assert (await stored_task(waiting.id)).state == "input-required"


async def test_retrying_the_same_message_id_returns_the_same_task_without_a_second_delivery(
    hub, sdk
):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    first = await send(client, request("echo once", message_id="retry-me"))
    second = await send(client, request("echo once", message_id="retry-me"))
    assert second.id == first.id
    assert len(scripted.state.messages) == 1
    assert await db(lambda: MessageRow.objects.filter(message_id="retry-me").count()) == 1


async def test_target_down_is_a_clear_error_and_the_task_fails_with_the_reason(hub, sdk):
    from tests.servers import free_port

    port = free_port()
    await hub.register_card(make_card("ghost", url=f"http://127.0.0.1:{port}/"))
    _, token = await hub.caller("alpha")
    client = await sdk("ghost", token)
    with pytest.raises(Exception, match="ghost unreachable") as exc:
        await send(client, request("echo anyone?", message_id="to-ghost"))
    assert "-32056" in str(exc.value)
    message = await db(lambda: MessageRow.objects.select_related("task").get(message_id="to-ghost"))
    assert message.task.state == "failed"
    assert "unreachable" in message.task.reason
    assert message.delivery_state == "failed"


async def test_target_down_over_rest_is_502(hub, raw):
    from tests.servers import free_port

    await hub.register_card(make_card("ghost", url=f"http://127.0.0.1:{free_port()}/"))
    _, token = await hub.caller("alpha")
    response = await raw.post(
        "/a2a/ghost/rest/message:send",
        json=send_params(),
        headers={**V1, "Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 502
    assert error_info(response.json())["reason"] == "AGENT_UNAVAILABLE"
    assert error_info(response.json())["metadata"]["agent"] == "ghost"


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [(500, b"upstream broke", "HTTP Error 500"), (200, b"<html>not json</html>", "JSON Decode")],
)
async def test_target_answering_what_is_not_a2a_fails_the_task_with_what_it_said(
    hub, sdk, status, body, said
):
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    from tests.servers import ServerThread

    async def broken(_request: Any) -> Response:
        return Response(body, status_code=status, media_type="text/html")

    server = ServerThread(Starlette(routes=[Route("/", broken, methods=["POST"])])).start()
    try:
        await hub.register_card(make_card("broken", url=f"{server.url}/"))
        _, token = await hub.caller("alpha")
        client = await sdk("broken", token)
        with pytest.raises(Exception, match=f"broken failed: .*{said}") as exc:
            await send(client, request("echo anyone?", message_id="to-broken"))
        assert "-32056" in str(exc.value)
    finally:
        server.stop()
    message = await db(
        lambda: MessageRow.objects.select_related("task").get(message_id="to-broken")
    )
    assert message.task.state == "failed"
    assert said in message.task.reason
    assert message.delivery_state == "failed"


async def test_a_cookie_one_agent_sets_never_reaches_another_agent(hub, sdk):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.servers import ServerThread

    seen: dict[str, list[str | None]] = {"setter": [], "other": []}

    def agent(name: str) -> Starlette:
        async def answer(request: Request) -> JSONResponse:
            seen[name].append(request.headers.get("cookie"))
            body = await request.json()
            reply = {"messageId": f"{name}-{len(seen[name])}", "role": "ROLE_AGENT"}
            response = JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": body["id"],
                    "result": {"message": {**reply, "parts": [{"text": "ok"}]}},
                }
            )
            if name == "setter":
                response.set_cookie("session", "setter-secret")
            return response

        return Starlette(routes=[Route("/", answer, methods=["POST"])])

    servers = [ServerThread(agent(name)).start() for name in ("setter", "other")]
    try:
        for name, server in zip(("setter", "other"), servers, strict=True):
            # A host name: cookie jars ignore cookies from bare IP addresses.
            await hub.register_card(make_card(name, url=f"http://localhost:{server.port}/"))
        _, token = await hub.caller("alpha")
        for name in ("setter", "setter", "other"):
            await send(
                await sdk(name, token), request("hello", message_id=f"to-{name}-{len(seen[name])}")
            )
    finally:
        for server in servers:
            server.stop()
    assert seen == {"setter": [None, None], "other": [None]}


async def test_target_slow_past_the_timeout_ends_in_a_failed_task_not_a_hang(hub, sdk):
    await hub.endpoint_agent("sloth")
    _, token = await hub.caller("alpha")
    client = await sdk("sloth", token)
    task = await send(client, request("slow 10", metadata={"a2aHub": {"timeoutSeconds": 0.5}}))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.parts[0].text == "sloth did not answer within 0.5 s"
    assert (await stored_task(task.id)).reason == "sloth did not answer within 0.5 s"


async def test_bad_timeout_is_invalid_params(hub, sdk):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    with pytest.raises(InvalidParamsError) as exc:
        await send(client, request("echo", metadata={"a2aHub": {"timeoutSeconds": -1}}))
    assert "metadata.a2aHub.timeoutSeconds" in str(exc.value.data)


async def test_list_tasks_rejects_bad_page_size_and_history_length(raw, setup):
    response = await raw.get(
        "/a2a/echo/rest/tasks", params={"pageSize": 150, "historyLength": -5}, headers=setup
    )
    assert response.status_code == 400
    fields = [
        v["field"]
        for d in response.json()["error"]["details"]
        if d["@type"].endswith("BadRequest")
        for v in d["fieldViolations"]
    ]
    assert fields == ["pageSize", "historyLength"]


async def test_delegation_from_a_task_you_do_not_work_on_is_refused(hub, sdk):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    theirs = await send(client, request("echo x"))
    before = await counts()
    with pytest.raises(InvalidParamsError) as exc:
        await send(client, request("echo y", metadata={"a2aHub": {"parentTaskId": theirs.id}}))
    assert "is not a task alpha is working on" in str(exc.value.data)
    assert await counts() == before
