"""The hub's implementation of the a2a-sdk `RequestHandler`: parse, dispatch, map errors."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import Any, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler, validate_request_params
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import PushNotificationNotSupportedError, UnsupportedOperationError
from django.conf import settings

from a2a_core import timeline
from a2a_core.delivery import push
from a2a_core.delivery.call import Call, MessageSend
from a2a_core.delivery.conductor import send_message
from a2a_core.delivery.streams import stream_message, subscribe
from a2a_core.delivery.task_calls import cancel_task, get_task, list_tasks
from a2a_core.delivery.wire import Answer
from a2a_core.errors import AgentSuspended, HubError
from a2a_core.metrics import CallRecord
from a2a_core.protocol.errors import to_a2a

T = TypeVar("T")

CALL_KEY = "hub_call"


def _call(context: ServerCallContext) -> Call:
    call = context.state.get(CALL_KEY)
    if not isinstance(call, Call):
        raise UnsupportedOperationError("this endpoint is only reachable through the hub")
    return call


def _not_suspended(context: ServerCallContext) -> Call:
    """The call, unless its caller is suspended. A suspended agent's messages go to the
    policy, which refuses and records them (`caller_suspended`); everything else it asks —
    reads, cancels, subscriptions, push configs — is refused here."""
    call = _call(context)
    if call.caller.is_suspended:
        raise to_a2a(AgentSuspended(call.caller.slug, call.caller.status_reason))
    return call


def _push_call(context: ServerCallContext) -> Call:
    if not settings.HUB_PUSH_ENABLED:
        raise PushNotificationNotSupportedError("push notifications are not enabled on this hub")
    return _not_suspended(context)


async def _mapped[T](awaitable: Awaitable[T]) -> T:
    try:
        return await awaitable
    except HubError as exc:
        raise to_a2a(exc) from None


async def _mapped_stream(stream: AsyncIterator[Any]) -> AsyncGenerator[Any]:
    try:
        async for item in stream:
            yield item
    except HubError as exc:
        raise to_a2a(exc) from None


class HubRequestHandler(RequestHandler):
    """Serves A2A for every registered agent; `context.state["hub_call"]` says who calls whom."""

    @validate_request_params
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        timeline.mark("handler")
        return (await self.send_message(MessageSend.of(params), context)).proto()

    async def send_message(self, request: MessageSend, context: ServerCallContext) -> Answer:
        """SendMessage, as every binding serves it: the JSON-RPC relay
        (`a2a_core.protocol.jsonrpc_relay`) with the request it checked, the SDK's servers
        through `on_message_send`."""
        call = _call(context)
        record = _record(call, "SendMessage")
        try:
            answer = await _mapped(send_message(call, request))
        except Exception as exc:
            record.failed(exc)
            raise
        except BaseException:  # the caller went away
            record.status = "disconnected"
            raise
        else:
            record.status = answer.status
            return answer
        finally:
            record.finish()

    @validate_request_params
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        call = _call(context)
        record = _record(call, "SendStreamingMessage")
        try:
            async for item in _mapped_stream(stream_message(call, params)):
                record.saw(item)
                yield item
        except Exception as exc:
            record.failed(exc)
            raise
        except BaseException:  # the caller went away mid-stream
            record.status = "disconnected"
            raise
        finally:
            record.finish()

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        return await _mapped(get_task(_not_suspended(context), params))

    @validate_request_params
    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        return await _mapped(list_tasks(_not_suspended(context), params))

    @validate_request_params
    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        return await _mapped(cancel_task(_not_suspended(context), params))

    @validate_request_params
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        async for item in _mapped_stream(subscribe(_not_suspended(context), params)):
            yield item

    # Push config methods check their own fields (reporting every problem at once), after
    # answering PushNotificationNotSupported when the hub has push notifications off.

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        call = _push_call(context)
        return await _mapped(
            push.config_create(caller=call.caller, target=call.target, request=params)
        )

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        call = _push_call(context)
        return await _mapped(
            push.config_get(caller=call.caller, target=call.target, request=params)
        )

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        call = _push_call(context)
        return await _mapped(
            push.config_list(caller=call.caller, target=call.target, request=params)
        )

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        call = _push_call(context)
        await _mapped(push.config_delete(caller=call.caller, target=call.target, request=params))

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise UnsupportedOperationError("agents registered with the hub have no extended card")


def _record(call: Call, method: str) -> CallRecord:
    target = call.target.slug if call.target is not None else "hub"
    return CallRecord(call.caller.slug, target, method, learned=call.learned)
