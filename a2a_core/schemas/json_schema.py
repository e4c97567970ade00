"""Checking a JSON value against the JSON Schema an agent declared for a structured answer,
with `jsonschema` (the draft the schema names, else 2020-12), every problem at its dotted path.

The agent still validates what it receives; this check is there so a human sees a mistake
before the agent does. A schema that is not valid JSON Schema, or that `jsonschema` cannot
apply (a `$ref` to nowhere, a pattern Python cannot read), checks nothing rather than
refusing every answer. `format` is not enforced.
"""

from __future__ import annotations

from typing import Any

from jsonschema import ValidationError, validators
from jsonschema.exceptions import SchemaError, _RefResolutionError
from referencing.exceptions import Unresolvable

from a2a_core.errors import FieldProblem


def schema_problems(value: Any, schema: Any, *, path: str = "data") -> list[FieldProblem]:
    """Every way `value` breaks `schema` (empty when it fits), each at its dotted path."""
    if not isinstance(schema, dict):
        return []
    validator_class = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
        errors = list(validator_class(schema).iter_errors(value))
    except (SchemaError, Unresolvable, _RefResolutionError, ValueError, TypeError):
        return []
    problems: list[FieldProblem] = []
    for error in errors:
        problems.extend(_problems(error, path))
    return problems


def _problems(error: ValidationError, root: str) -> list[FieldProblem]:
    where = ".".join([root, *(str(p) for p in error.absolute_path)])
    keyword, bound, instance = error.validator, error.validator_value, error.instance
    if keyword == "required" and isinstance(instance, dict):
        return [
            FieldProblem(f"{where}.{name}", "required") for name in bound if name not in instance
        ]
    if keyword == "additionalProperties" and isinstance(instance, dict):
        known = set(error.schema.get("properties", {}))
        patterns = error.schema.get("patternProperties", {})
        extra = [n for n in instance if n not in known and not patterns]
        return [FieldProblem(f"{where}.{name}", "not an expected field") for name in extra]
    words = {
        "type": lambda: "expected " + " or ".join(bound if isinstance(bound, list) else [bound]),
        "enum": lambda: "must be one of " + ", ".join(repr(v) for v in bound),
        "const": lambda: f"must be {bound!r}",
        "minLength": lambda: f"at least {bound} characters",
        "maxLength": lambda: f"at most {bound} characters",
        "pattern": lambda: f"must match {bound}",
        "minimum": lambda: f"at least {bound}",
        "maximum": lambda: f"at most {bound}",
        "exclusiveMinimum": lambda: f"more than {bound}",
        "exclusiveMaximum": lambda: f"less than {bound}",
        "minItems": lambda: f"at least {bound} items",
        "maxItems": lambda: f"at most {bound} items",
    }
    message = words[str(keyword)]() if keyword in words else error.message
    return [FieldProblem(where, message)]
