"""A2A's ProtoJSON in plain dicts, checked against the A2A types without a protobuf round trip.

Contract: `normalized(data, T)` is exactly `MessageToDict(ParseDict(data, T(), ...))`, the
form the a2a-sdk gives a decoded ProtoJSON object of type `T` (camelCase names, fields in
field-number order, defaults left out, Struct numbers as floats, 64-bit integers as strings)
and raises what `ParseDict` raises for data that is not a `T`. `canonical` computes it from
the data alone, walking the type's descriptor, for the plain form agents and callers send:
strings, booleans, 32-bit integers, enum names, timestamps, Struct/Value/ListValue and nested
messages. Anything else (bytes, floating-point fields, maps, integers given as strings, `null`
for a field, unknown fields...) is None there, and `normalized` hands it to protobuf itself.
So the hub relays what was sent, as it is, whenever the round trip would not change it, and
what protobuf would make of it otherwise (tests/a2a_core/test_protojson.py holds it to that).

`required=True` also makes a missing field that the A2A types mark REQUIRED None, as the
a2a-sdk's `validate_proto_required_fields` would refuse it (the caller leaves it to the SDK,
which says so in its own words). A plain SendMessage costs about a tenth of the round trip.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from google.api.field_behavior_pb2 import FieldBehavior, field_behavior
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message as ProtoMessage
from google.protobuf.timestamp_pb2 import Timestamp

_STRUCT = "google.protobuf.Struct"
_VALUE = "google.protobuf.Value"
_LIST = "google.protobuf.ListValue"
_TIMESTAMP = "google.protobuf.Timestamp"
_INT32 = frozenset(
    {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32}
)
_UINT32 = frozenset({FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32})
_INT64 = frozenset(
    {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64}
)
_UINT64 = frozenset({FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64})
# A timestamp as protobuf writes one: UTC, with 0, 3, 6 or 9 digits of fraction.
_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6}|\.\d{9})?Z")
# Integers a double holds exactly: a Struct number past them is left to protobuf.
_EXACT = 2**53


class _NotPlain(Exception):
    """The data is outside the plain form `canonical` computes: protobuf decides."""


@dataclass(frozen=True)
class _Field:
    json_name: str
    number: int
    kind: int
    repeated: bool
    presence: bool
    oneof: str
    message: Descriptor | None
    enum_names: frozenset[str]
    enum_zero: str


@dataclass(frozen=True)
class _Type:
    fields: dict[str, _Field]  # by JSON name and by proto name
    required: tuple[str, ...]  # JSON names of the REQUIRED fields


@cache
def _type(descriptor: Descriptor) -> _Type:
    fields: dict[str, _Field] = {}
    required = []
    for field in descriptor.fields:
        message = field.message_type
        if message is not None and message.GetOptions().map_entry:
            message = None  # maps are left to protobuf (A2A's request and answer have none)
            kind = -1
        else:
            kind = field.type
        enum = field.enum_type
        entry = _Field(
            json_name=field.json_name,
            number=field.number,
            kind=kind,
            repeated=field.is_repeated,
            presence=field.has_presence,
            oneof=field.containing_oneof.name if field.containing_oneof else "",
            message=message,
            enum_names=frozenset(v.name for v in enum.values) if enum else frozenset(),
            enum_zero=enum.values_by_number[0].name if enum and 0 in enum.values_by_number else "",
        )
        fields[field.json_name] = fields[field.name] = entry
        if FieldBehavior.REQUIRED in field.GetOptions().Extensions[field_behavior]:
            required.append(field.json_name)
    return _Type(fields, tuple(required))


def canonical(
    data: Any, message: type[ProtoMessage], *, required: bool = False
) -> dict[str, Any] | None:
    """`data` as `MessageToDict(ParseDict(data, message(), ignore_unknown_fields=True))`
    gives it, or None when it is not in the plain form computed here (see the module's
    docstring); with `required`, None too when a REQUIRED field is missing."""
    try:
        return _message(data, message.DESCRIPTOR, required)
    except _NotPlain:
        return None


def normalized(
    data: Any, message: type[ProtoMessage], *, ignore_unknown_fields: bool = True
) -> dict[str, Any]:
    """`MessageToDict(ParseDict(data, message(), ignore_unknown_fields=...))`, computed
    without protobuf when the data is plain; raises what ParseDict raises."""
    found = canonical(data, message)
    if found is not None:
        return found
    parsed = ParseDict(data, message(), ignore_unknown_fields=ignore_unknown_fields)
    return MessageToDict(parsed, preserving_proto_field_name=False)


def struct(data: dict[str, Any]) -> dict[str, Any]:
    """A JSON object as it comes out of a protobuf Struct (numbers as floats)."""
    try:
        return _struct(data)
    except _NotPlain:
        from google.protobuf.struct_pb2 import Struct

        return MessageToDict(ParseDict(data, Struct()))


def _message(data: Any, descriptor: Descriptor, required: bool) -> dict[str, Any]:
    if type(data) is not dict:
        raise _NotPlain
    table = _type(descriptor)
    found: list[tuple[int, str, Any]] = []
    oneofs: set[str] = set()
    seen: set[int] = set()
    for key, value in data.items():
        field = table.fields.get(key)
        if field is None or field.number in seen:
            raise _NotPlain  # unknown (protobuf drops it), or a field given twice
        seen.add(field.number)
        if field.oneof:
            if field.oneof in oneofs:
                raise _NotPlain
            oneofs.add(field.oneof)
        if field.repeated:
            if type(value) is not list:
                raise _NotPlain
            if not value:
                continue
            out: Any = [_value_of(field, item, required) for item in value]
        else:
            out = _value_of(field, value, required)
            if not field.presence and (
                out == ""
                or out is False
                or out == 0
                or (field.enum_zero and out == field.enum_zero)
            ):
                continue  # a default value: left out, as protobuf leaves it out
        found.append((field.number, field.json_name, out))
    found.sort()
    result = {name: out for _, name, out in found}
    if required:
        for name in table.required:
            if name not in result:
                raise _NotPlain
    return result


def _value_of(field: _Field, value: Any, required: bool) -> Any:
    kind = field.kind
    if kind == FieldDescriptor.TYPE_STRING:
        if type(value) is not str:
            raise _NotPlain
        return value
    if kind == FieldDescriptor.TYPE_BOOL:
        if type(value) is not bool:
            raise _NotPlain
        return value
    if kind == FieldDescriptor.TYPE_ENUM:
        if type(value) is not str or value not in field.enum_names:
            raise _NotPlain
        return value
    if kind == FieldDescriptor.TYPE_MESSAGE:
        name = field.message.full_name  # type: ignore[union-attr]
        if name == _STRUCT:
            return _struct(value)
        if name == _VALUE:
            if value is None:
                raise _NotPlain
            return _json(value)
        if name == _LIST:
            if type(value) is not list:
                raise _NotPlain
            return [_json(item) for item in value]
        if name == _TIMESTAMP:
            return _timestamp(value)
        if name.startswith("google.protobuf."):
            raise _NotPlain
        return _message(value, field.message, required)
    if type(value) is not int:
        raise _NotPlain
    if kind in _INT32 and -(2**31) <= value < 2**31:
        return value
    if kind in _UINT32 and 0 <= value < 2**32:
        return value
    if kind in _INT64 and -(2**63) <= value < 2**63:
        return str(value)
    if kind in _UINT64 and 0 <= value < 2**64:
        return str(value)
    raise _NotPlain  # floating point, bytes, maps: protobuf's own rules


def _struct(value: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise _NotPlain
    return {key: _json(item) for key, item in value.items()}


def _json(value: Any) -> Any:
    """A JSON value as a protobuf Value holds it."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if -_EXACT <= value <= _EXACT:
            return float(value)
        raise _NotPlain
    if kind is float:
        if math.isfinite(value):
            return value
        raise _NotPlain
    if kind is dict:
        return {key: _json(item) for key, item in value.items()}
    if kind is list:
        return [_json(item) for item in value]
    raise _NotPlain


def _timestamp(value: Any) -> str:
    if type(value) is not str:
        raise _NotPlain
    if _UTC.fullmatch(value) and not value.endswith(("000Z", ".Z")):
        try:  # the form protobuf writes; a real date and time
            datetime.fromisoformat(value[:19])
        except ValueError:
            raise _NotPlain from None
        return value
    stamp = Timestamp()
    try:
        stamp.FromJsonString(value)
        return str(stamp.ToJsonString())
    except ValueError:
        raise _NotPlain from None
