"""Push notification configs as the A2A spec has them: the token is optional and, when set,
arrives as `X-A2A-Notification-Token`; a webhook's host is resolved when the config is created
(every spelling of a refused address refused there) and again when a POST is made, and the
POST goes to an address checked then."""

from __future__ import annotations

import json
import re

import pytest
from a2a.types.a2a_pb2 import (
    GetTaskPushNotificationConfigRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError

from a2a_core.client.webhooks import verify
from tests.a2a_core.protocol.helpers import BINDINGS, eventually, request, send
from tests.a2a_core.push.conftest import SPELLINGS, TOKEN, refusal, summary
from tests.a2a_core.push.test_push_through_hub import (
    ECHO,
    push_config,
    received_until_completed,
    stored_configs,
)
from tests.peers import PeerProcess, peer

pytestmark = pytest.mark.live

UNRESOLVABLE = "http://hooks.example.invalid/hook"


def with_push(text: str, config: TaskPushNotificationConfig):
    """A SendMessage request carrying `config` inline."""
    message = request(text)
    message.configuration.task_push_notification_config.CopyFrom(config)
    return message


async def all_given_up(count: int) -> list:
    async def check():
        configs = await stored_configs()
        done = len(configs) == count and all(c.undelivered == len(ECHO) for c in configs)
        return configs if done else None

    return await eventually(check, within=15)


# --- the token ------------------------------------------------------------------------------


async def test_a_config_without_a_token_is_accepted_and_posted_to_without_token_headers(
    hub, sdk, webhook, loopback_allowed
):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    created_hook, inline_hook = webhook(), webhook()
    task = await send(client, request("echo hi"))

    created = await client.create_task_push_notification_config(
        TaskPushNotificationConfig(task_id=task.id, url=created_hook.url)
    )
    await send(client, with_push("echo hi", TaskPushNotificationConfig(url=inline_hook.url)))

    assert created.token == ""
    for hook in (created_hook, inline_hook):
        received = await received_until_completed(hook)
        assert [summary(r.event) for r in received] == ECHO
        for r in received:
            assert "x-a2a-notification-token" not in r.headers
            assert "x-a2a-signature" not in r.headers
    assert [c.token for c in await stored_configs()] == ["", ""]


async def test_the_token_arrives_as_x_a2a_notification_token_whatever_its_length(
    hub, sdk, webhook, loopback_allowed
):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    created_hook, inline_hook = webhook(), webhook()
    task = await send(client, request("echo hi"))

    await client.create_task_push_notification_config(push_config(task.id, created_hook.url))
    await send(
        client, with_push("echo hi", TaskPushNotificationConfig(url=inline_hook.url, token="t0k"))
    )

    for hook, sent in ((created_hook, TOKEN), (inline_hook, "t0k")):
        received = await received_until_completed(hook)
        assert [summary(r.event) for r in received] == ECHO
        for r in received:
            assert r.headers["x-a2a-notification-token"] == sent
            verify(r.body, r.headers["x-a2a-signature"], sent)


@pytest.mark.parametrize("token", ["two\nlines", "tökén", " padded", "x" * 501])
async def test_a_token_that_cannot_be_sent_as_a_header_is_refused_naming_the_token_field(
    hub, sdk, webhook, loopback_allowed, token
):
    await hub.endpoint_agent("echo")
    _, caller_token = await hub.caller("alpha")
    client = await sdk("echo", caller_token)
    task = await send(client, request("echo hi"))

    with pytest.raises(InvalidParamsError) as refused:
        await client.create_task_push_notification_config(
            push_config(task.id, webhook().url, token=token)
        )

    [problem] = refused.value.data["errors"]
    assert problem["field"] == "token"
    assert await stored_configs() == []


# --- where the webhook is -------------------------------------------------------------------


async def test_a_host_that_does_not_resolve_is_accepted_and_its_posts_fail_saying_so(
    hub, sdk, settings
):
    settings.HUB_PUSH_MAX_ATTEMPTS = 1
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    task = await send(client, request("echo hi"))

    created = await client.create_task_push_notification_config(
        push_config(task.id, UNRESOLVABLE, id="created")
    )
    inline_task = await send(
        client, with_push("echo hi", TaskPushNotificationConfig(url=UNRESOLVABLE, id="inline"))
    )

    assert created.url == UNRESOLVABLE
    assert inline_task.status.state == TaskState.TASK_STATE_COMPLETED
    configs = await all_given_up(2)
    for config in configs:
        assert config.last_error == (
            f"event {len(ECHO)}, attempt 1: webhook host hooks.example.invalid does not resolve"
        )
        assert config.last_status is None
    fetched = await client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=inline_task.id, id="inline")
    )
    assert fetched.url == UNRESOLVABLE


async def test_a_name_allowed_when_created_is_checked_again_before_each_post(
    hub, sdk, webhook, settings
):
    """DNS can change after a config is created, so the check before each POST stays: here
    the allow-list changes instead, between a first POST (answered 500) and its retry."""
    settings.HUB_PUSH_ALLOWED_HOSTS = ["localhost"]
    settings.HUB_PUSH_RETRY_SECONDS = 0.05
    settings.HUB_PUSH_MAX_ATTEMPTS = 100  # still retrying when it is allowed again
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    hook = webhook(statuses=[500])
    by_name = hook.url.replace("127.0.0.1", "localhost")
    task = await send(client, request("echo hi"))

    await client.create_task_push_notification_config(push_config(task.id, by_name))

    async def first_post():
        return hook.received

    await eventually(first_post)
    settings.HUB_PUSH_ALLOWED_HOSTS = []

    async def refused():
        configs = await stored_configs()
        return configs if "loopback" in configs[0].last_error else None

    [config] = await eventually(refused)
    assert re.fullmatch(
        r"event 1, attempt \d+: localhost resolves to (127\.0\.0\.1|::1), which is a loopback "
        r"address; the hub only POSTs to public addresses "
        r"\(an operator can allow it with HUB_PUSH_ALLOWED_HOSTS\)",
        config.last_error,
    ), config.last_error
    assert config.last_status is None
    assert [r.answered for r in hook.received] == [500]

    settings.HUB_PUSH_ALLOWED_HOSTS = ["localhost"]
    received = await received_until_completed(hook)
    assert [summary(r.event) for r in received] == ECHO
    assert {r.headers["host"] for r in received} == {by_name.split("/")[2]}


async def test_a_loopback_address_is_refused_when_created_unless_allow_listed(
    hub, sdk, webhook, settings
):
    settings.HUB_PUSH_ALLOWED_HOSTS = []
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    hook = webhook()
    task = await send(client, request("echo hi"))
    mapped = hook.url.replace("127.0.0.1", "[::ffff:127.0.0.1]")

    for url in (hook.url, mapped):
        with pytest.raises(InvalidParamsError, match="is a loopback address"):
            await client.create_task_push_notification_config(push_config(task.id, url))
        with pytest.raises(InvalidParamsError, match="is a loopback address"):
            await send(client, with_push("echo hi", TaskPushNotificationConfig(url=url)))
    assert await stored_configs() == []

    settings.HUB_PUSH_ALLOWED_HOSTS = ["10.0.0.0/8", "127.0.0.0/8"]
    await client.create_task_push_notification_config(push_config(task.id, hook.url))

    received = await received_until_completed(hook)
    assert [summary(r.event) for r in received] == ECHO


@pytest.mark.parametrize("binding", BINDINGS)
async def test_every_spelling_of_an_internal_address_is_refused_when_the_config_is_created(
    hub, sdk, webhook, settings, binding
):
    settings.HUB_PUSH_ALLOWED_HOSTS = []
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token, binding=binding)
    hook = webhook()
    port = int(hook.url.split(":")[2].split("/")[0])
    task = await send(client, request("echo hi"))

    refused = {}
    for spelling in SPELLINGS:
        url = f"http://{spelling}:{port}/hook"
        with pytest.raises(InvalidParamsError) as created:
            await client.create_task_push_notification_config(push_config(task.id, url))
        with pytest.raises(InvalidParamsError) as inline:
            await send(client, with_push("echo hi", TaskPushNotificationConfig(url=url)))
        refused[spelling] = [
            (problem["field"], problem["message"])
            for error in (created, inline)
            for problem in error.value.data["errors"]
        ]

    assert refused == {
        spelling: [("url", refusal(spelling, address))] * 2
        for spelling, address in SPELLINGS.items()
    }
    assert await stored_configs() == []
    assert hook.received == []


async def test_the_a2a_0_3_set_method_refuses_those_spellings_too(hub, sdk, settings):
    """tasks/pushNotificationConfig/set, from the a2a-sdk 0.3 client in a process of its own
    (which reads the card of the 1.0 agent from the hub in the 0.3 view: it sends no version)."""
    settings.HUB_PUSH_ALLOWED_HOSTS = []
    settings.HUB_CARD_UNVERSIONED = "0.3"
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    task = await send(await sdk("echo", token), request("echo hi"))
    urls = [f"http://{spelling}:8080/hook" for spelling in SPELLINGS]

    out = PeerProcess(
        peer("sdk03"), "sdk03_push_config.py", hub.url, "echo", token, task.id, *urls
    ).run()

    answers = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [a["url"] for a in answers] == urls
    for answer, (spelling, address) in zip(answers, SPELLINGS.items(), strict=True):
        assert answer["code"] == -32602, answer
        assert answer["data"]["errors"] == [
            {"field": "url", "message": refusal(spelling, address)}
        ], answer
    assert await stored_configs() == []


async def test_a_name_the_resolver_cannot_encode_is_refused_when_created(hub, sdk, settings):
    """A label past 63 characters: no resolver will ever look it up, and the sender would
    have failed on it at every attempt."""
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    task = await send(client, request("echo hi"))
    host = "a" * 64 + ".example.com"

    with pytest.raises(InvalidParamsError) as refused:
        await client.create_task_push_notification_config(
            push_config(task.id, f"https://{host}/hook")
        )

    assert refused.value.data["errors"] == [
        {"field": "url", "message": f"webhook host {host} is not a valid host name"}
    ]
    assert await stored_configs() == []
