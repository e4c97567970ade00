"""Checking a JSON value against the JSON Schema an agent declared for a structured answer.

The keywords agents use to describe an answer are checked: `type`, `enum`, `const`,
`properties`, `required`, `additionalProperties`, `items`, `minItems`/`maxItems`,
`minLength`/`maxLength`, `pattern`, `minimum`/`maximum` and their exclusive forms. Other
keywords (`$ref`, `oneOf`, `format`...) are not enforced: the agent still validates what it
receives; this check is there so a human sees a mistake before the agent does.
"""

from __future__ import annotations

import re
from typing import Any

from a2a_core.errors import FieldProblem

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is(value: Any, name: str) -> bool:
    if name in ("number", "integer") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, ()))


def schema_problems(value: Any, schema: Any, *, path: str = "data") -> list[FieldProblem]:
    """Every way `value` breaks `schema` (empty when it fits), each at its dotted path."""
    if not isinstance(schema, dict):
        return []
    problems: list[FieldProblem] = []

    def problem(message: str) -> list[FieldProblem]:
        problems.append(FieldProblem(path, message))
        return problems

    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_is(value, str(name)) for name in names):
            return problem(f"expected {' or '.join(map(str, names))}")
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        problem("must be one of " + ", ".join(repr(v) for v in schema["enum"]))
    if "const" in schema and value != schema["const"]:
        problem(f"must be {schema['const']!r}")
    if isinstance(value, str):
        if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
            problem(f"at least {schema['minLength']} characters")
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            problem(f"at most {schema['maxLength']} characters")
        if isinstance(schema.get("pattern"), str):
            try:
                if re.search(schema["pattern"], value) is None:
                    problem(f"must match {schema['pattern']}")
            except re.error:
                pass  # a pattern Python cannot read is the agent's to check
    if isinstance(value, int | float) and not isinstance(value, bool):
        for keyword, fails, words in (
            ("minimum", lambda v, b: v < b, "at least"),
            ("maximum", lambda v, b: v > b, "at most"),
            ("exclusiveMinimum", lambda v, b: v <= b, "more than"),
            ("exclusiveMaximum", lambda v, b: v >= b, "less than"),
        ):
            bound = schema.get(keyword)
            if (
                isinstance(bound, int | float)
                and not isinstance(bound, bool)
                and fails(value, bound)
            ):
                problem(f"{words} {bound}")
    if isinstance(value, list):
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            problem(f"at least {schema['minItems']} items")
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            problem(f"at most {schema['maxItems']} items")
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                problems.extend(schema_problems(item, schema["items"], path=f"{path}.{i}"))
    if isinstance(value, dict):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        for name in schema.get("required") or []:
            if name not in value:
                problems.append(FieldProblem(f"{path}.{name}", "required"))
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                problems.extend(schema_problems(item, properties[name], path=f"{path}.{name}"))
            elif extra is False:
                problems.append(FieldProblem(f"{path}.{name}", "not an expected field"))
            elif isinstance(extra, dict):
                problems.extend(schema_problems(item, extra, path=f"{path}.{name}"))
    return problems
