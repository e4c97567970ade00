"""Push notifications end to end: the official SDK client configures them through the hub, a
real webhook server receives the task's events, signed."""

from __future__ import annotations

import logging

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
)

from a2a_core.asyncdb import db
from a2a_core.client.webhooks import InvalidSignature, ReplayGuard, verify
from a2a_core.models import PushNotificationConfig, Task
from a2a_core.services.push import MAX_CONFIGS_PER_TASK
from tests.a2a_core.protocol.helpers import BINDINGS, eventually, request, send
from tests.a2a_core.push.conftest import TOKEN, summary
from tests.conftest import Worker

pytestmark = pytest.mark.live

STREAM_3 = [
    ("status", "TASK_STATE_WORKING"),
    ("artifact", "chunk 0;"),
    ("artifact", "chunk 1;"),
    ("artifact", "chunk 2;"),
    ("status", "TASK_STATE_COMPLETED"),
]
# A blocking "echo" is recorded from the finished task the agent answers with.
ECHO = [("artifact", "echo: hi"), ("status", "TASK_STATE_COMPLETED")]


def push_config(task_id: str, url: str, **fields: object) -> TaskPushNotificationConfig:
    fields.setdefault("token", TOKEN)
    return TaskPushNotificationConfig(task_id=task_id, url=url, **fields)


async def received_until_completed(hook, count: int = 1) -> list:
    async def check():
        done = [r for r in hook.accepted if "TASK_STATE_COMPLETED" in r.body.decode()]
        return hook.accepted if len(done) >= count else None

    return await eventually(check, within=15)


async def stored_configs() -> list[PushNotificationConfig]:
    return await db(lambda: list(PushNotificationConfig.objects.order_by("pk")))


# --- delivery -------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_webhook_receives_the_task_updates_in_order_signed_and_authorized(
    hub, sdk, webhook, loopback_allowed, binding
):
    await hub.endpoint_agent("worker")
    _, token = await hub.caller("alpha")
    client = await sdk("worker", token, binding=binding)
    hook = webhook()

    task = await send(client, request("stream 3 0.3", return_immediately=True))
    created = await client.create_task_push_notification_config(
        push_config(
            task.id,
            hook.url,
            authentication=AuthenticationInfo(scheme="Bearer", credentials="hook-secret"),
        )
    )

    assert created.id and created.task_id == task.id and created.url == hook.url
    received = await received_until_completed(hook)
    assert [summary(r.event) for r in received] == STREAM_3
    assert {r.event[next(iter(r.event))]["taskId"] for r in received} == {task.id}
    for r in received:
        verify(r.body, r.headers["x-a2a-signature"], TOKEN)
        assert r.headers["authorization"] == "Bearer hook-secret"
        assert r.headers["content-type"] == "application/json"
        assert r.headers["x-a2a-notification-token"] == TOKEN
    task_row = await db(Task.objects.get, pk=task.id)

    async def all_recorded():
        configs = await stored_configs()
        return configs if configs[0].delivered_seq == task_row.event_seq else None

    [config] = await eventually(all_recorded)
    assert (config.attempts, config.undelivered, config.last_status) == (0, 0, 200)


async def test_a_delivered_signature_is_refused_when_replayed_tampered_or_old(
    hub, sdk, webhook, loopback_allowed
):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    hook = webhook()
    task = await send(client, request("echo hi"))
    await client.create_task_push_notification_config(push_config(task.id, hook.url))
    first = (await received_until_completed(hook))[0]
    header = first.headers["x-a2a-signature"]
    guard = ReplayGuard()

    verify(first.body, header, TOKEN, seen=guard)

    with pytest.raises(InvalidSignature, match="replayed"):
        verify(first.body, header, TOKEN, seen=guard)
    with pytest.raises(InvalidSignature, match="does not match"):
        verify(first.body.replace(b'taskId":"', b'taskId":"x'), header, TOKEN)
    with pytest.raises(InvalidSignature, match="does not match"):
        verify(first.body, header, "someone-elses-key-0123456789")
    signed_at = int(header.split(",")[0].removeprefix("t="))
    with pytest.raises(InvalidSignature, match="away from now"):
        verify(first.body, header, TOKEN, now=signed_at + 301)


async def test_a_failing_webhook_gets_the_event_after_retries(hub, sdk, webhook, loopback_allowed):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    hook = webhook(statuses=[500, 500])
    task = await send(client, request("echo hi"))

    await client.create_task_push_notification_config(push_config(task.id, hook.url))

    await received_until_completed(hook)
    assert [(summary(r.event), r.answered) for r in hook.received] == [
        (ECHO[0], 500),
        (ECHO[0], 500),
        (ECHO[0], 200),
        (ECHO[1], 200),
    ]
    [config] = await stored_configs()
    assert config.last_error == "event 1, attempt 2: HTTP 500"
    assert (config.attempts, config.undelivered, config.last_status) == (0, 0, 200)


async def test_a_webhook_that_keeps_failing_is_given_up_on_event_by_event_and_says_why(
    hub, sdk, webhook, loopback_allowed, caplog
):
    loopback_allowed.HUB_PUSH_MAX_ATTEMPTS = 2
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    hook = webhook(statuses=[503] * 100)
    task = await send(client, request("echo hi"))
    caplog.set_level(logging.WARNING, logger="a2a_hub.push")

    await client.create_task_push_notification_config(push_config(task.id, hook.url))

    async def all_given_up():
        configs = await stored_configs()
        return configs if configs[0].undelivered == len(ECHO) else None

    [config] = await eventually(all_given_up, within=15)
    assert [summary(r.event) for r in hook.received] == [e for e in ECHO for _ in range(2)]
    assert config.last_error == "event 2, attempt 2: HTTP 503"
    assert config.last_status == 503
    given_up = [r for r in caplog.records if r.getMessage() == "push notification given up"]
    assert [r.seq for r in given_up] == [1, 2]


async def test_a_redirect_is_not_followed(hub, sdk, webhook, loopback_allowed):
    loopback_allowed.HUB_PUSH_MAX_ATTEMPTS = 1
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    elsewhere = webhook()
    hook = webhook(statuses=[302] * 10, location=elsewhere.url)
    task = await send(client, request("echo hi"))

    await client.create_task_push_notification_config(push_config(task.id, hook.url))

    async def all_given_up():
        configs = await stored_configs()
        return configs if configs[0].undelivered == len(ECHO) else None

    [config] = await eventually(all_given_up, within=15)
    assert "redirects are not followed" in config.last_error
    assert len(hook.received) == len(ECHO)
    assert elsewhere.received == []


async def test_two_workers_send_each_event_once(hub, sdk, webhook, loopback_allowed):
    worker = Worker(HUB_PUSH_ALLOWED_HOSTS="127.0.0.1").wait()
    try:
        await hub.endpoint_agent("worker")
        _, token = await hub.caller("alpha")
        client = await sdk("worker", token)
        hooks = [webhook() for _ in range(4)]
        tasks = [await send(client, request("stream 3", return_immediately=True)) for _ in hooks]
        for task, hook in zip(tasks, hooks, strict=True):
            await client.create_task_push_notification_config(push_config(task.id, hook.url))

        for hook in hooks:
            received = await received_until_completed(hook)
            assert [summary(r.event) for r in received] == STREAM_3
    finally:
        worker.stop()


# --- configs --------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_configs_can_be_created_read_listed_replaced_and_deleted(
    hub, sdk, webhook, loopback_allowed, binding
):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token, binding=binding)
    hook = webhook()
    task = await send(client, request("echo hi"))

    generated = await client.create_task_push_notification_config(push_config(task.id, hook.url))
    named = await client.create_task_push_notification_config(
        push_config(task.id, hook.url, id="mine")
    )
    replaced = await client.create_task_push_notification_config(
        push_config(
            task.id,
            f"{hook.url}?v=2",
            id="mine",
            authentication=AuthenticationInfo(scheme="Basic", credentials="dXNlcjpwdw=="),
        )
    )

    assert named.id == replaced.id == "mine"
    fetched = await client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
    )
    assert fetched == replaced
    assert fetched.url.endswith("?v=2") and fetched.authentication.scheme == "Basic"
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert [c.id for c in listed.configs] == [generated.id, "mine"]

    await client.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
    )

    with pytest.raises(TaskNotFoundError):
        await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
        )
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert [c.id for c in listed.configs] == [generated.id]


async def test_another_agent_cannot_read_list_or_delete_your_config(
    hub, sdk, webhook, loopback_allowed
):
    _, _, echo_token = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    _, mallory_token = await hub.caller("mallory")
    mine = await sdk("echo", token)
    hook = webhook()
    task = await send(mine, request("echo hi"))
    await mine.create_task_push_notification_config(push_config(task.id, hook.url, id="mine"))
    ref = GetTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
    delete = DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
    listing = ListTaskPushNotificationConfigsRequest(task_id=task.id)

    # The agent the task was sent to is a party to it, but the config is not its own.
    target = await sdk("echo", echo_token)
    with pytest.raises(TaskNotFoundError):
        await target.get_task_push_notification_config(ref)
    assert list((await target.list_task_push_notification_configs(listing)).configs) == []
    await target.delete_task_push_notification_config(delete)
    # An agent with no part in the task does not even see it.
    stranger = await sdk("echo", mallory_token)
    with pytest.raises(TaskNotFoundError, match=f"task {task.id} not found"):
        await stranger.get_task_push_notification_config(ref)
    with pytest.raises(TaskNotFoundError):
        await stranger.delete_task_push_notification_config(delete)
    with pytest.raises(TaskNotFoundError):
        await stranger.create_task_push_notification_config(push_config(task.id, hook.url))

    assert (await mine.get_task_push_notification_config(ref)).url == hook.url
    assert [c.config_id for c in await stored_configs()] == ["mine"]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://10.1.2.3/hook", "10.1.2.3 is a private address"),
        ("http://[::1]:8080/hook", "::1 is a loopback address"),
        ("http://[::ffff:127.0.0.1]/hook", "::ffff:127.0.0.1 is a loopback address"),
        ("http://[fd00::1]/hook", "fd00::1 is a private address"),
        ("http://0.0.0.0/hook", "0.0.0.0 is a unspecified address"),
        ("http://224.0.0.1/hook", "224.0.0.1 is a multicast address"),
        ("ftp://files.example.com/hook", "must be an http:// or https:// URL"),
        ("http://user:pw@example.com/hook", "must not carry credentials"),
        ("http://example.com/" + "a" * 1000, "at most 1000 characters"),
    ],
)
async def test_a_url_the_hub_must_not_post_to_is_refused_and_nothing_is_stored(
    hub, sdk, url, reason
):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    task = await send(client, request("echo hi"))

    with pytest.raises(InvalidParamsError) as refused:
        await client.create_task_push_notification_config(push_config(task.id, url))

    [problem] = refused.value.data["errors"]
    assert problem["field"] == "url"
    assert reason in problem["message"]
    assert await stored_configs() == []


async def test_every_problem_with_a_config_is_reported_at_once(hub, sdk):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    task = await send(client, request("echo hi"))

    with pytest.raises(InvalidParamsError) as refused:
        await client.create_task_push_notification_config(
            push_config(
                task.id,
                "gopher://example.com/",
                token="two\nlines",
                authentication=AuthenticationInfo(scheme="Bearer x", credentials="a\r\nb"),
            )
        )

    assert {p["field"] for p in refused.value.data["errors"]} == {
        "url",
        "token",
        "authentication.scheme",
        "authentication.credentials",
    }


async def test_configs_per_task_are_limited(hub, sdk, webhook, loopback_allowed):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    hook = webhook()
    task = await send(client, request("echo hi"))
    for i in range(MAX_CONFIGS_PER_TASK):
        await client.create_task_push_notification_config(
            push_config(task.id, hook.url, id=f"c{i}")
        )

    with pytest.raises(InvalidParamsError, match="delete one first"):
        await client.create_task_push_notification_config(push_config(task.id, hook.url))

    assert len(await stored_configs()) == MAX_CONFIGS_PER_TASK


# --- switched off ---------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_with_push_disabled_the_methods_say_not_supported_and_cards_say_false(
    hub, sdk, settings, binding
):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token, binding=binding)
    task = await send(client, request("echo hi"))
    async with httpx.AsyncClient(base_url=hub.url) as raw:
        enabled = (await raw.get("/a2a/echo/.well-known/agent-card.json")).json()
        settings.HUB_PUSH_ENABLED = False
        disabled = (await raw.get("/a2a/echo/.well-known/agent-card.json")).json()
        hub_card = (await raw.get("/.well-known/agent-card.json")).json()

    assert enabled["capabilities"]["pushNotifications"] is True
    assert disabled["capabilities"].get("pushNotifications", False) is False
    assert hub_card["capabilities"].get("pushNotifications", False) is False
    calls = [
        lambda: client.create_task_push_notification_config(
            push_config(task.id, "https://example.com/hook")
        ),
        lambda: client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="x")
        ),
        lambda: client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        ),
        lambda: client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="x")
        ),
    ]
    for call in calls:
        with pytest.raises(PushNotificationNotSupportedError):
            await call()


async def test_a_config_sent_with_the_message_gets_that_tasks_updates(
    hub, sdk, webhook, loopback_allowed
):
    await hub.endpoint_agent("worker")
    _, token = await hub.caller("alpha")
    client = await sdk("worker", token)
    hook = webhook()
    message = request("stream 3 0.3", return_immediately=True)
    message.configuration.task_push_notification_config.CopyFrom(
        TaskPushNotificationConfig(url=hook.url, token=TOKEN)
    )
    task = await send(client, message)
    received = await received_until_completed(hook)
    assert [summary(r.event) for r in received] == STREAM_3
    [config] = await stored_configs()
    assert config.task_id == task.id


async def test_a_refused_config_sent_with_the_message_refuses_the_message(hub, sdk):
    await hub.endpoint_agent("worker")
    _, token = await hub.caller("alpha")
    client = await sdk("worker", token)
    message = request("echo hi")
    message.configuration.task_push_notification_config.CopyFrom(
        TaskPushNotificationConfig(url="http://169.254.169.254/latest", token=TOKEN)
    )
    with pytest.raises(InvalidParamsError, match="push notification url refused"):
        await send(client, message)
    assert await db(Task.objects.count) == 0
    assert await stored_configs() == []
