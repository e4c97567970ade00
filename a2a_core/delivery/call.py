"""A call at the hub: who calls whom, with what headers, and what serving it found out; and
the SendMessage request it carries, in the ProtoJSON form the hub records and forwards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2a.types.a2a_pb2 import SendMessageRequest
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a_core.call_times import CallTimes
from a2a_core.models import Agent


@dataclass(frozen=True)
class Call:
    """Who calls whom: the authenticated caller and the agent whose endpoint was called
    (None for the hub's own endpoint), with the request's headers (lower-cased names).
    `response_headers` are added to the HTTP response (e.g. Retry-After on a refusal)."""

    caller: Agent
    target: Agent | None
    headers: dict[str, str] = field(default_factory=dict)
    response_headers: dict[str, str] = field(default_factory=dict)
    # What serving the call found out (task_id, skill, trace_id), for its metrics and log;
    # message_pk, the hub's row of the message it sent, for a receipt.
    learned: dict[str, str] = field(default_factory=dict)
    # When it passed each point of its way (the trace's split of a span's time).
    times: CallTimes = field(default_factory=CallTimes)

    @property
    def agent(self) -> Agent:
        if self.target is None:
            raise UnsupportedOperationError(
                "address an agent: send messages to /a2a/<agent>/, not to the hub itself"
            )
        return self.target


@dataclass
class MessageSend:
    """A SendMessage request as ProtoJSON (`params`, exactly as `MessageToDict` writes the
    SDK's SendMessageRequest: `a2a_core.schemas.protojson`), the form the hub records and
    forwards. The SDK's type is made from it only where something needs one (a push config,
    a binding other than JSON-RPC towards the agent)."""

    params: dict[str, Any]
    _proto: SendMessageRequest | None = None

    @classmethod
    def of(cls, request: SendMessageRequest) -> MessageSend:
        """From the SDK's type (gRPC, REST, streaming: what the SDK's servers parsed)."""
        return cls(MessageToDict(request), request)

    @property
    def proto(self) -> SendMessageRequest:
        if self._proto is None:
            self._proto = ParseDict(self.params, SendMessageRequest())
        return self._proto

    @property
    def message(self) -> dict[str, Any]:
        return self.params.get("message") or {}

    @property
    def metadata(self) -> dict[str, Any]:
        """The request's metadata ({} when none was sent)."""
        return self.params.get("metadata") or {}

    @property
    def configuration(self) -> dict[str, Any]:
        return self.params.get("configuration") or {}

    @property
    def return_immediately(self) -> bool:
        return bool(self.configuration.get("returnImmediately", False))

    @property
    def accepted_output_modes(self) -> list[str]:
        return list(self.configuration.get("acceptedOutputModes") or [])

    @property
    def has_push_config(self) -> bool:
        return "taskPushNotificationConfig" in self.configuration
