"""An inline push config sent with a retried message is saved, once."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import ListTaskPushNotificationConfigsRequest, TaskPushNotificationConfig

from tests.a2a_core.protocol.helpers import request, send
from tests.a2a_core.push.conftest import TOKEN, summary
from tests.a2a_core.push.test_push_through_hub import ECHO, received_until_completed

pytestmark = pytest.mark.live


async def test_a_retry_with_an_inline_push_config_saves_it_once(
    hub, sdk, webhook, loopback_allowed
):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    hook = webhook()
    task = await send(client, request("echo hi", message_id="push-later"))

    for _ in range(2):
        retry = request("echo hi", message_id="push-later")
        retry.configuration.task_push_notification_config.CopyFrom(
            TaskPushNotificationConfig(url=hook.url, token=TOKEN)
        )
        assert (await send(client, retry)).id == task.id

    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert [config.url for config in listed.configs] == [hook.url]
    received = await received_until_completed(hook)
    assert [summary(r.event) for r in received] == ECHO
    assert len(scripted.state.messages) == 1
