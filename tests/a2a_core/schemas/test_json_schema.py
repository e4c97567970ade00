"""The answer-schema check: every way a value breaks the schema, each at its path."""

from __future__ import annotations

import pytest

from a2a_core.schemas.json_schema import schema_problems

SCHEMA = {
    "type": "object",
    "required": ["go", "window"],
    "additionalProperties": False,
    "properties": {
        "go": {"type": "boolean"},
        "window": {"type": "string", "enum": ["tonight", "monday"]},
        "retries": {"type": "integer", "minimum": 0, "maximum": 3},
        "owners": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
    },
}


def problems(value):
    return [str(p) for p in schema_problems(value, SCHEMA)]


def test_a_value_that_fits_has_no_problems():
    assert problems({"go": True, "window": "monday", "retries": 2, "owners": ["ana"]}) == []


def test_every_problem_is_reported_at_its_path():
    assert problems({"go": "yes", "retries": 7, "owners": ["Ana", 3], "extra": 1}) == [
        "data.window: required",
        "data.extra: not an expected field",
        "data.go: expected boolean",
        "data.retries: at most 3",
        "data.owners.0: must match ^[a-z]+$",
        "data.owners.1: expected string",
    ]


@pytest.mark.parametrize(
    ("value", "schema", "fits"),
    [
        (True, {"type": "integer"}, False),  # a boolean is not a number in JSON Schema
        (2.0, {"type": "integer"}, True),
        (None, {"type": ["string", "null"]}, True),
        ("x", {"type": "string", "minLength": 2}, False),
        ([1], {"type": "array", "minItems": 2}, False),
        (5, {"exclusiveMaximum": 5}, False),
        ("a", {"const": "a"}, True),
        ("anything", {"format": "email", "$ref": "#/x"}, True),  # not enforced, nowhere
        (
            {"n": "x"},
            {"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}},
            False,
        ),
        ("x", {"oneOf": [{"type": "integer"}, {"type": "boolean"}]}, False),
        ({"a": 1}, "not a schema", True),
    ],
)
def test_single_keywords(value, schema, fits):
    assert (schema_problems(value, schema) == []) is fits
