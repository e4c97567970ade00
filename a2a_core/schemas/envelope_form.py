"""A typed envelope as form fields, generated from its pydantic model's JSON Schema, and the
envelope back from what a person typed in them.

The fields are flat, one per leaf of the schema, named by their path (`payload.title`):
strings are text inputs (a textarea past 500 characters), enums are menus, numbers number
inputs, booleans checkboxes, lists of strings a line each, and anything the schema leaves
open (unions, lists of objects) a JSON text. The hub's own fields (kind, hop, traceId,
timestamp) are not offered: the kind is fixed, the rest the hub sets on the way through.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any, get_args

from a2a_core.errors import FieldProblem
from a2a_core.schemas.envelopes import Envelope

HUB_FIELDS = frozenset({"kind", "hop", "traceId", "timestamp"})
# A JSON text a person may type into one field.
MAX_FIELD = 100_000


@dataclass
class FormField:
    path: str
    label: str
    # text | textarea | number | checkbox | select | lines | json
    widget: str
    value: str = ""
    checked: bool = False
    choices: list[str] = field(default_factory=list)
    # The enum's values as the schema has them (a menu's choice may be a number).
    choice_values: list[Any] = field(default_factory=list)
    required: bool = False
    optional: bool = False
    help: str = ""
    errors: list[str] = field(default_factory=list)
    # Form field names are `<prefix>.<path>`: `env.payload.title`, `data.window`.
    prefix: str = "env"

    @property
    def name(self) -> str:
        return f"{self.prefix}.{self.path}"


@cache
def _models() -> dict[str, type[Any]]:
    union = get_args(Envelope)[0]
    return {get_args(m.model_fields["kind"].annotation)[0]: m for m in get_args(union)}


@cache
def kind_schema(kind: str) -> dict[str, Any] | None:
    """The JSON Schema (camelCase names) of the envelope model of `kind`, or None."""
    model = _models().get(kind)
    return model.model_json_schema(by_alias=True) if model is not None else None


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while isinstance(node.get("$ref"), str) and seen < 32:
        seen += 1
        folder, _, name = node["$ref"].removeprefix("#/").rpartition("/")
        found = root.get(folder, {}).get(name) if folder in ("$defs", "definitions") else None
        if not isinstance(found, dict):
            return {}  # a reference this form cannot follow: a JSON text
        node = found
    return node


def envelope_fields(envelope: dict[str, Any]) -> list[FormField]:
    """The form fields of a (valid, canonical) envelope, filled with its values."""
    schema = kind_schema(str(envelope.get("kind", "")))
    if schema is None:
        return []
    fields: list[FormField] = []
    _walk(schema, schema, [], envelope, required=True, out=fields)
    return fields


def answer_fields(schema: Any) -> list[FormField]:
    """The form of an answer an agent asked for with `schema` (fields named `data.<path>`);
    none when the schema does not describe an object with properties (then a JSON text)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    fields: list[FormField] = []
    try:
        _walk(schema, schema, [], {}, required=True, out=fields, skip=frozenset())
    except (AttributeError, TypeError, KeyError):
        return []  # a schema too odd to draw: the JSON text is always there
    for f in fields:
        f.prefix = "data"
    return fields


def _walk(
    node: dict[str, Any],
    root: dict[str, Any],
    path: list[str],
    value: Any,
    *,
    required: bool,
    out: list[FormField],
    optional: bool = False,
    skip: frozenset[str] = HUB_FIELDS,
) -> None:
    node = _resolve(node, root)
    if "anyOf" in node:
        members = [_resolve(m, root) for m in node["anyOf"] if m.get("type") != "null"]
        optional = optional or len(members) < len(node["anyOf"])
        if len(members) == 1:
            _walk(
                {**members[0], **{k: v for k, v in node.items() if k != "anyOf"}},
                root,
                path,
                value,
                required=required,
                out=out,
                optional=optional,
                skip=skip,
            )
            return
        out.append(_leaf(path, "json", node, value, required=required, optional=optional))
        return
    kind = node.get("type")
    if kind == "object" and "properties" in node:
        needed = set(node.get("required", []))
        for name, child in node["properties"].items():
            if not path and name in skip:
                continue
            current = value.get(name) if isinstance(value, dict) else None
            # Inside an optional object every field may be left blank.
            _walk(
                child,
                root,
                [*path, name],
                current,
                required=name in needed,
                out=out,
                optional=optional,
                skip=skip,
            )
        return
    if "enum" in node:
        leaf = _leaf(path, "select", node, value, required=required, optional=optional)
        leaf.choices = [str(choice) for choice in node["enum"]]
        leaf.choice_values = list(node["enum"])
        out.append(leaf)
    elif kind == "string":
        long = node.get("maxLength", 0) > 500
        widget = "textarea" if long else "text"
        out.append(_leaf(path, widget, node, value, required=required, optional=optional))
    elif kind in ("integer", "number"):
        out.append(_leaf(path, "number", node, value, required=required, optional=optional))
    elif kind == "boolean":
        leaf = _leaf(path, "checkbox", node, value, required=required, optional=optional)
        leaf.checked = bool(value)
        out.append(leaf)
    elif kind == "array" and _resolve(node.get("items", {}), root).get("type") == "string":
        out.append(_leaf(path, "lines", node, value, required=required, optional=optional))
    else:
        out.append(_leaf(path, "json", node, value, required=required, optional=optional))


def _leaf(
    path: list[str],
    widget: str,
    node: dict[str, Any],
    value: Any,
    *,
    required: bool,
    optional: bool,
) -> FormField:
    if widget == "lines":
        shown = "\n".join(str(v) for v in value or [])
    elif widget == "json":
        shown = "" if value is None else json.dumps(value, indent=1, ensure_ascii=False)
    else:
        shown = "" if value is None else str(value)
    return FormField(
        path=".".join(path),
        label=" / ".join(path),
        widget=widget,
        value=shown,
        required=required,
        optional=optional or not required,
        help=str(node.get("description", "")),
    )


def envelope_from_form(
    original: dict[str, Any], fields: list[FormField], posted: Any
) -> tuple[dict[str, Any], list[FieldProblem]]:
    """`original` with each field set from `posted` (a QueryDict or dict); a blank optional
    field removes its key. Problems are the values that could not be read (not a number,
    not JSON); whether the envelope is valid is the model's to say."""
    result = copy.deepcopy(original)
    problems: list[FieldProblem] = []
    for f in fields:
        raw = str(posted.get(f.name, "") or "")[:MAX_FIELD]
        value: Any
        if f.widget == "checkbox":
            value = f.name in posted
        elif f.widget == "lines":
            value = [line.strip() for line in raw.splitlines() if line.strip()]
        elif not raw.strip():
            value = None if f.optional else ""
        elif f.widget == "select":
            value = next((v for v in f.choice_values if str(v) == raw), raw)
        elif f.widget == "number":
            try:
                value = int(raw) if raw.strip().lstrip("-").isdigit() else float(raw)
            except ValueError:
                problems.append(FieldProblem(f.path, f"not a number: {raw.strip()!r}"))
                continue
        elif f.widget == "json":
            try:
                value = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                problems.append(FieldProblem(f.path, f"not valid JSON: {exc}"))
                continue
        else:
            value = raw.strip()
        _set(result, f.path.split("."), value)
    return result, problems


def _set(target: dict[str, Any], path: list[str], value: Any) -> None:
    for name in path[:-1]:
        child = target.get(name)
        if not isinstance(child, dict):
            if value is None:
                return
            child = target[name] = {}
        target = child
    if value is None:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value


def json_diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """What changed between two JSON values, leaf by leaf: [{path, before, after}]."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes = []
        for key in [*before, *(k for k in after if k not in before)]:
            changes += json_diff(before.get(key), after.get(key), f"{path}.{key}" if path else key)
        return changes
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        changes = []
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            changes += json_diff(b, a, f"{path}[{i}]")
        return changes
    return [] if before == after else [{"path": path, "before": before, "after": after}]
