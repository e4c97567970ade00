"""The hub's own errors as a client of the hub sees them.

The a2a-sdk's JSON-RPC client knows the codes the spec defines; the hub's own (a policy
refusal, a rate limit, an open breaker: -32050..-32059) would reach a caller as a bare
`A2AClientError` with the code in its text. `HubJsonRpcTransport` gives them their class,
with the error's `google.rpc.ErrorInfo` metadata (the policy's `reason`,
`retryAfterSeconds`...) as `data`, without changing the SDK for anyone else in the process.
"""

from __future__ import annotations

from typing import Any

from a2a.client.transports.jsonrpc import JsonRpcTransport

from a2a_core.protocol.errors import HUB_ERRORS

_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_BY_CODE = {code: cls for cls, (code, _, _, _) in HUB_ERRORS.items()}


def error_info(data: Any) -> dict[str, Any] | None:
    """The metadata of the first ErrorInfo among an error's details."""
    for detail in data if isinstance(data, list) else ():
        if isinstance(detail, dict) and detail.get("@type") == _ERROR_INFO:
            metadata = detail.get("metadata")
            return metadata if isinstance(metadata, dict) else None
    return None


class HubJsonRpcTransport(JsonRpcTransport):
    """The SDK's JSON-RPC transport, knowing the hub's own error codes."""

    def _create_jsonrpc_error(self, error_dict: dict[str, Any]) -> Exception:
        cls = _BY_CODE.get(error_dict.get("code"))  # type: ignore[arg-type]
        if cls is None:
            return super()._create_jsonrpc_error(error_dict)
        message = str(error_dict.get("message") or cls.message)
        return cls(message, error_info(error_dict.get("data")))
