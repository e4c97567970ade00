"""Accepting a message: the policy's verdict committed through the group commit, the agent
that does the work, and a push config sent with the message checked and saved.
"""

from __future__ import annotations

from dataclasses import replace

from a2a.utils.errors import PushNotificationNotSupportedError
from django.conf import settings

from a2a_core import agent_cache, metrics, tracing
from a2a_core.asyncdb import db
from a2a_core.delivery import push
from a2a_core.delivery.call import Call, MessageSend
from a2a_core.errors import PermissionDenied, PolicyRejected, TargetUnavailable
from a2a_core.federation import peer_chain
from a2a_core.logging import trace_id_var
from a2a_core.models import Agent
from a2a_core.models import Scope as AgentScope
from a2a_core.services.accepted import Accepted
from a2a_core.services.messages import Inbound
from a2a_core.services.push import PushConfigInput, push_config_save, push_config_save_for_retry
from a2a_core.services.writes import accept_inbound
from a2a_core.storage.policy_state import retry_seconds


async def accept(call: Call, request: MessageSend) -> Accepted:
    """Accept the call's message (`accept_batch`, through the group commit). The call learns
    the task and its trace; a refusal the policy says when to retry gets its Retry-After."""
    started = tracing.now()
    try:
        accepted = await _submit_accept(call, request)
    except PolicyRejected as exc:
        tracing.routed(None, reason=exc.reason, started=started, decided_by=exc.decided_by)
        metrics.decided("reject", exc.reason)
        if exc.retry_after is not None:
            call.response_headers["Retry-After"] = str(retry_seconds(exc.retry_after))
        raise
    tracing.routed(accepted, started=started)
    trace_id_var.set(accepted.trace_id)
    call.learned.update(
        task_id=accepted.task_id,
        skill=accepted.skill,
        trace_id=accepted.trace_id,
        message_pk=str(accepted.message_pk),
    )
    if not accepted.duplicate:
        metrics.decided(accepted.decision, accepted.reason)
    return accepted


async def deliver_to(call: Call, accepted: Accepted) -> Agent:
    """The agent that does the work: the one called, or the one the policy redirected to."""
    target = call.agent
    if accepted.deliver_to and accepted.deliver_to != target.slug:
        other = await db(agent_cache.agent_by_slug, accepted.deliver_to)
        if other is None:
            raise TargetUnavailable(f"{accepted.deliver_to} is no longer registered")
        return other
    return target


async def _submit_accept(call: Call, request: MessageSend) -> Accepted:
    target = call.agent
    if not target.has_scope(AgentScope.RECEIVE):
        raise PermissionDenied(
            f"{target.slug} does not accept calls (its token lacks the a2a:receive scope)",
            details={"agent": target.slug, "missingScope": AgentScope.RECEIVE.value},
        )
    return await accept_inbound(
        Inbound(
            caller=call.caller,
            target=target,
            message=request.message,
            request_metadata=request.metadata,
            parent_hint=call.headers.get("a2a-hub-parent-task", ""),
            traceparent=call.headers.get("traceparent", ""),
            peer_chain=peer_chain(call.headers.get("a2a-hub-chain", ""))
            if call.caller.peer_hub
            else (),
        )
    )


async def inline_push(request: MessageSend) -> PushConfigInput | None:
    """A push notification config sent with the message, checked before the message is
    accepted (a refused one stores nothing)."""
    if not request.has_push_config:
        return None
    if not settings.HUB_PUSH_ENABLED:
        raise PushNotificationNotSupportedError("push notifications are not enabled on this hub")
    return await push.config_checked(
        request.proto.configuration.task_push_notification_config,
        task_id="(this message's task)",
    )


async def save_inline_push(
    call: Call, request: MessageSend, accepted: Accepted, config: PushConfigInput | None
) -> None:
    """Save a message's inline push config on its task; a retry's is saved too, unless the
    same config is there already."""
    if config is None:
        return
    config = replace(config, task_id=accepted.task_id)
    if accepted.duplicate:
        named = bool(request.proto.configuration.task_push_notification_config.id)
        await db(
            push_config_save_for_retry,
            owner=call.caller,
            target=call.target,
            config=config,
            id_named=named,
        )
    else:
        await db(push_config_save, owner=call.caller, target=call.target, config=config)
