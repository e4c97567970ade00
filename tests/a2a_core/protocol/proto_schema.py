"""A strict JSON Schema for an A2A 1.0 message, derived from the a2a-sdk's protobuf descriptors.

The spec publishes its JSON Schema generated from the same `a2a.proto`; it cannot be vendored
here, so tests derive the equivalent: the proto3 JSON mapping of every field (json_name,
scalar types, enum names, maps, repeated fields, well-known types), fields marked REQUIRED by
`google.api.field_behavior`, at most one member of each oneof, and no property the proto does
not define (`additionalProperties: false`).
"""

from __future__ import annotations

import itertools
from typing import Any

from google.api import field_behavior_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

_INTEGER = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_FIXED32,
}
_INTEGER_64 = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_SFIXED64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_FIXED64,
}
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.Timestamp": {"type": "string"},
    "google.protobuf.Duration": {"type": "string"},
    "google.protobuf.Empty": {"type": "object", "maxProperties": 0},
}


def json_schema(descriptor: Descriptor) -> dict[str, Any]:
    """The JSON Schema of `descriptor`'s message in proto3 JSON, with its messages in $defs."""
    defs: dict[str, dict[str, Any]] = {}
    root = _message_ref(descriptor, defs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **root, "$defs": defs}


def _message_ref(descriptor: Descriptor, defs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    name = descriptor.full_name
    if name in _WELL_KNOWN:
        return dict(_WELL_KNOWN[name])
    if name not in defs:
        defs[name] = {}  # placeholder: messages may refer to themselves
        defs[name] = _message(descriptor, defs)
    return {"$ref": f"#/$defs/{name}"}


def _message(descriptor: Descriptor, defs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    properties = {field.json_name: _field(field, defs) for field in descriptor.fields}
    required = [
        field.json_name
        for field in descriptor.fields
        if field_behavior_pb2.REQUIRED
        in field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    ]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    exclusive = [
        {"not": {"required": [a.json_name, b.json_name]}}
        for oneof in descriptor.oneofs
        for a, b in itertools.combinations(oneof.fields, 2)
    ]
    if exclusive:
        schema["allOf"] = exclusive
    return schema


def _field(field: FieldDescriptor, defs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value = field.message_type.fields_by_name["value"]
        return {"type": "object", "additionalProperties": _single(value, defs)}
    single = _single(field, defs)
    if field.is_repeated:
        return {"type": "array", "items": single}
    return single


def _single(field: FieldDescriptor, defs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    kind = field.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        return _message_ref(field.message_type, defs)
    if kind == FieldDescriptor.TYPE_ENUM:
        return {"enum": [value.name for value in field.enum_type.values]}
    if kind == FieldDescriptor.TYPE_BOOL:
        return {"type": "boolean"}
    if kind in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
        return {"type": "string"}
    if kind in _INTEGER:
        return {"type": "integer"}
    if kind in _INTEGER_64:
        return {"type": ["string", "integer"]}
    return {"type": "number"}
