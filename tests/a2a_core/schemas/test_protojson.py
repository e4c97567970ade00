"""The hub's ProtoJSON without protobuf is protobuf's: for every request and answer, plain or
not, `canonical` is either exactly `MessageToDict(ParseDict(...))` (what the a2a-sdk makes of
it) or None (the hub leaves it to protobuf), and `required=True` refuses exactly what the
SDK's `validate_proto_required_fields` refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, SendMessageRequest, SendMessageResponse, Task
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.json_format import MessageToDict, ParseDict
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_core.schemas.protojson import canonical, normalized, struct

# JSON values, with what protobuf treats specially: big integers, floats, NaN, nested
# objects, nulls.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
# Mostly right, sometimes wrong: a field's value drawn from what fits and what does not.
roles = st.sampled_from(["ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED", "user", 1, "", None])
states = st.sampled_from(
    ["TASK_STATE_COMPLETED", "TASK_STATE_WORKING", "TASK_STATE_UNSPECIFIED", "done", 3, None]
)
stamps = st.sampled_from(
    [
        "2026-01-02T03:04:05Z",
        "2026-01-02T03:04:05.100Z",
        "2026-01-02T03:04:05.120000Z",
        "2026-01-02T03:04:05.123456789Z",
        "2026-01-02T03:04:05+02:00",
        "2026-02-30T03:04:05Z",
        "yesterday",
        12,
    ]
)
ids = st.one_of(st.text(max_size=6), st.integers(max_value=9), st.none())
parts = st.one_of(
    st.fixed_dictionaries({"text": st.text(max_size=6)}, optional={"mediaType": ids}),
    st.fixed_dictionaries({"data": json_values}, optional={"metadata": json_values}),
    st.fixed_dictionaries({"url": ids}, optional={"filename": ids}),
    st.fixed_dictionaries({"raw": st.sampled_from(["aGk=", "aGk", "!"])}),
    st.fixed_dictionaries({"text": st.text(max_size=3), "data": json_values}),
    st.dictionaries(st.sampled_from(["kind", "file", "text"]), json_values, max_size=2),
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "messageId": ids,
        "message_id": ids,
        "role": roles,
        "parts": st.lists(parts, max_size=3),
        "contextId": ids,
        "taskId": ids,
        "metadata": json_values,
        "extensions": st.lists(ids, max_size=2),
        "referenceTaskIds": st.lists(st.text(max_size=3), max_size=2),
        "kind": st.just("message"),
    },
)
requests = st.fixed_dictionaries(
    {"message": messages},
    optional={
        "configuration": st.fixed_dictionaries(
            {},
            optional={
                "acceptedOutputModes": st.lists(st.text(max_size=4), max_size=2),
                "historyLength": st.one_of(st.integers(-3, 2**33), st.just("2")),
                "returnImmediately": st.one_of(st.booleans(), st.just("yes")),
            },
        ),
        "metadata": json_values,
        "tenant": ids,
    },
)
tasks = st.fixed_dictionaries(
    {"id": ids},
    optional={
        "contextId": ids,
        "status": st.fixed_dictionaries(
            {"state": states}, optional={"timestamp": stamps, "message": messages}
        ),
        "history": st.lists(messages, max_size=2),
        "artifacts": st.lists(
            st.fixed_dictionaries(
                {"artifactId": ids}, optional={"parts": st.lists(parts, max_size=2)}
            ),
            max_size=2,
        ),
        "metadata": json_values,
    },
)
answers = st.one_of(
    st.fixed_dictionaries({"task": tasks}),
    st.fixed_dictionaries({"message": messages}),
    st.fixed_dictionaries({"task": tasks, "message": messages}),
)


def _reference(data: Any, message: type) -> dict[str, Any] | None:
    try:
        return MessageToDict(ParseDict(data, message(), ignore_unknown_fields=True))
    except Exception:
        return None


def _refusal(data: Any, message: type) -> type[Exception]:
    try:
        ParseDict(data, message(), ignore_unknown_fields=True)
    except Exception as exc:
        return type(exc)
    raise AssertionError("protobuf took it")


def _same(found: dict[str, Any], expected: dict[str, Any]) -> None:
    assert found == expected
    # The same JSON too (1 and 1.0 are equal in Python, not on the wire), fields in order.
    assert json.dumps(found, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert list(found) == list(expected)


@settings(max_examples=200, deadline=None)
@given(requests)
def test_a_request_is_what_protobuf_makes_of_it_or_left_to_protobuf(data: dict[str, Any]) -> None:
    expected = _reference(data, SendMessageRequest)
    found = canonical(data, SendMessageRequest)
    if expected is None:
        assert found is None  # protobuf refuses it: so does the relay, by leaving it to the SDK
    elif found is not None:
        _same(found, expected)
    if expected is not None:
        _same(normalized(data, SendMessageRequest), expected)


@settings(max_examples=200, deadline=None)
@given(answers)
def test_an_answer_is_what_the_sdk_client_makes_of_it(data: dict[str, Any]) -> None:
    expected = _reference(data, SendMessageResponse)
    found = canonical(data, SendMessageResponse)
    if expected is None:
        assert found is None
        with pytest.raises(_refusal(data, SendMessageResponse)):  # what the SDK's client raises
            normalized(data, SendMessageResponse)
    else:
        if found is not None:
            _same(found, expected)
        _same(normalized(data, SendMessageResponse), expected)


@settings(max_examples=300, deadline=None)
@given(requests)
def test_required_fields_are_refused_as_the_sdk_refuses_them(data: dict[str, Any]) -> None:
    plain = canonical(data, SendMessageRequest)
    if plain is None:
        return
    try:
        validate_proto_required_fields(
            ParseDict(data, SendMessageRequest(), ignore_unknown_fields=True)
        )
        refused = False
    except InvalidParamsError:
        refused = True
    assert (canonical(data, SendMessageRequest, required=True) is None) == refused


def test_the_plain_forms_callers_and_agents_send_are_read_without_protobuf() -> None:
    message = {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [
            {"text": "Please review."},
            {
                "data": {"kind": "review", "n": 2, "tags": ["a", None]},
                "mediaType": "application/json",
            },
        ],
        "metadata": {"priority": 1},
        "extensions": ["https://a2a-hub.dev/extensions/envelope/v1"],
    }
    request = {"message": message, "configuration": {"historyLength": 0}, "metadata": {}}
    assert canonical(request, SendMessageRequest, required=True) == _reference(
        request, SendMessageRequest
    )
    task = {
        "id": "t-1",
        "contextId": "c-1",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-02T03:04:05.120Z"},
        "history": [message],
        "artifacts": [{"artifactId": "a-1", "parts": [{"text": "done"}]}],
    }
    assert canonical({"task": task}, SendMessageResponse) == _reference(
        {"task": task}, SendMessageResponse
    )
    # A request without the fields A2A requires is the SDK's to refuse.
    assert (
        canonical(
            {"message": {"role": "ROLE_USER", "parts": []}}, SendMessageRequest, required=True
        )
        is None
    )


def test_what_is_not_plain_is_protobuf_s() -> None:
    # Snake-case names, bytes, a timestamp with an offset: normalized the way protobuf does.
    for data, kind in [
        ({"message_id": "m", "parts": [{"raw": "aGk="}]}, Message),
        ({"id": "t", "status": {"timestamp": "2026-01-02T03:04:05+02:00"}}, Task),
        ({"id": "t", "unknown": 1}, Task),
    ]:
        assert normalized(data, kind) == _reference(data, kind)
    assert struct({"n": 1, "big": 2**60, "list": [1, "x"]}) == {
        "n": 1.0,
        "big": float(2**60),
        "list": [1.0, "x"],
    }
