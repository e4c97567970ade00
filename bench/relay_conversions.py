"""What one JSON-RPC SendMessage to an echo agent costs the hub in conversions, before and after
the relay (`a2a_core.protocol.jsonrpc_relay`), in the same process and minutes.

    python bench/relay_conversions.py [--calls 3000] [--repeat 5]

Before: the SDK's server parses the params into protobuf and checks the required fields, the
hub makes a dict of the message, copies it for the agent with its fields under `a2aHub`, the
SDK's client writes the request as a dict and parses the answer, the hub makes a dict of it,
copies it for the caller, and the SDK's server writes that as a dict. After: the relay checks
the params once (`canonical`, required fields too), the hub forwards and answers dicts put in
protobuf's own form (`normalized`), and reads the agent's answer once. Only the conversions
are timed (no I/O, no database): the best of `--repeat` runs of `--calls` calls each.
"""

from __future__ import annotations

import argparse
import timeit
import uuid

import _setup  # noqa: F401  (the hub's packages on the path)
from a2a.types.a2a_pb2 import Message, SendMessageRequest, SendMessageResponse
from a2a.utils.proto_utils import parse_lenient, validate_proto_required_fields
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a_core.schemas.protojson import canonical, normalized

PARAMS = {
    "message": {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": "hello hub"}],
    }
}
HUB = {"taskId": "t" * 32, "contextId": "c" * 32, "traceId": "a" * 32, "caller": "bench"}
ANSWER = {
    "message": {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_AGENT",
        "parts": [{"text": "echo: hello hub"}],
        "contextId": "x" * 36,
        "taskId": "y" * 36,
    }
}


def before() -> None:
    request = ParseDict(PARAMS, SendMessageRequest(), ignore_unknown_fields=True)
    validate_proto_required_fields(request)
    MessageToDict(request.message)
    forwarded = Message()
    forwarded.CopyFrom(request.message)
    forwarded.task_id, forwarded.context_id = "remote-task", "remote-context"
    forwarded.metadata.update({"a2aHub": HUB})
    sent = SendMessageRequest(message=forwarded)
    sent.configuration.return_immediately = False
    MessageToDict(sent)
    answer = parse_lenient(ANSWER, SendMessageResponse())
    MessageToDict(answer.message)
    reply = Message()
    reply.CopyFrom(answer.message)
    reply.context_id, reply.task_id = "hub-context", ""
    MessageToDict(SendMessageResponse(message=reply))


def after() -> None:
    params = canonical(PARAMS, SendMessageRequest, required=True)
    assert params is not None
    message = {**params["message"], "taskId": "remote-task", "contextId": "remote-context"}
    message["metadata"] = {"a2aHub": HUB}
    forwarded = normalized(message, Message)
    normalized({"message": forwarded, "configuration": {}}, SendMessageRequest)
    answer = canonical(ANSWER, SendMessageResponse)
    assert answer is not None
    reply = {**answer["message"], "contextId": "hub-context"}
    reply.pop("taskId")
    normalized(reply, Message)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    figures = {}
    for name, run in (("before", before), ("after", after)):
        best = min(timeit.repeat(run, number=args.calls, repeat=args.repeat))
        figures[name] = best / args.calls * 1e6
        print(f"{name}: {figures[name]:.0f} us of conversions per call")
    print(f"after/before: {figures['after'] / figures['before']:.2f}x")


if __name__ == "__main__":
    main()
