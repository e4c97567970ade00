"""Agent card validation for registration.

The SDK's protobuf `AgentCard` is the source of truth for the A2A 1.0 card format. Parsing a
whole card with protobuf stops at the first problem, so each top-level field (and each skill
and interface) is parsed on its own to report every problem in one answer. A 0.3 card (it has
a top-level `url` and no `supportedInterfaces`) is converted with the SDK's compat layer.

A 1.0 card that also carries the 0.3 fields, as a2a-sdk 1.x servers that serve 0.3 clients
too serve theirs (and the hub serves its own to a client that sends no `A2A-Version`), is a
1.0 card: its `supportedInterfaces` say where the agent is, and the 0.3 fields beside them are
left out (`without_v03_fields`); a 0.3 field whose 1.0 counterpart is missing is converted.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.conversions import to_core_agent_card
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from pydantic import ValidationError

from a2a_core.errors import FieldProblem, ValidationFailed, field_problems
from a2a_core.schemas.a2a import holds_lone_surrogate

SUPPORTED_BINDINGS = (
    TransportProtocol.JSONRPC.value,
    TransportProtocol.HTTP_JSON.value,
    TransportProtocol.GRPC.value,
)
_LIST_FIELDS = ("skills", "supportedInterfaces")


@dataclass(frozen=True)
class CheckedCard:
    card: AgentCard
    # The card as the hub stores and serves it (ProtoJSON, camelCase).
    data: dict[str, Any]
    digest: str
    converted_from: str | None = None


def card_digest(data: dict[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def card_to_dict(card: AgentCard) -> dict[str, Any]:
    return MessageToDict(card, preserving_proto_field_name=False)


_JSON_TYPES = {
    FieldDescriptor.TYPE_STRING: (str, "a string"),
    FieldDescriptor.TYPE_BOOL: (bool, "true or false"),
    FieldDescriptor.TYPE_MESSAGE: (dict, "an object"),
}


def _clean(text: str) -> str:
    # protobuf says 'Failed to parse X field: ... at "AgentCard.x".\n Available Fields...'
    text = text.split("\n", 1)[0]
    text = re.sub(r"^(Failed to parse \w+ field: )+", "", text)
    text = re.sub(r' at "[^"]*"\.?$', "", text)
    text = re.sub(r'Message type "[^"]+" has no field named "([^"]+)"', r'unknown field "\1"', text)
    return text.rstrip(".")


def _type_problem(path: str, field: FieldDescriptor, value: Any) -> FieldProblem | None:
    expected = _JSON_TYPES.get(field.type)
    if field.is_repeated and not (field.message_type and field.message_type.GetOptions().map_entry):
        if not isinstance(value, list):
            return FieldProblem(path, f"must be a list, got {type(value).__name__}")
        return None
    if expected and not isinstance(value, expected[0]):
        return FieldProblem(path, f"must be {expected[1]}, got {type(value).__name__}")
    return None


def _field_by_field(
    data: dict[str, Any],
) -> tuple[dict[str, Any], list[FieldProblem], dict[str, list[int]]]:
    """Parse each field alone: the fields that parsed, a problem for each that didn't, and for
    list fields the original index of each item kept (so later problems name the right item)."""
    good: dict[str, Any] = {}
    kept_at: dict[str, list[int]] = {}
    problems: list[FieldProblem] = []
    fields = {f.json_name: f for f in AgentCard.DESCRIPTOR.fields}
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            problems.append(FieldProblem(key, "unknown field for an A2A 1.0 agent card"))
            continue
        if problem := _type_problem(key, field, value):
            problems.append(problem)
            continue
        if key in _LIST_FIELDS:
            kept = []
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    problems.append(
                        FieldProblem(f"{key}[{i}]", f"must be an object, got {type(item).__name__}")
                    )
                    continue
                try:
                    ParseDict({key: [item]}, AgentCard())
                    kept.append(item)
                    kept_at.setdefault(key, []).append(i)
                except (ParseError, TypeError, ValueError) as exc:
                    problems.append(FieldProblem(f"{key}[{i}]", _clean(str(exc))))
            good[key] = kept
            continue
        try:
            ParseDict({key: value}, AgentCard())
            good[key] = value
        except (ParseError, TypeError, ValueError) as exc:
            problems.append(FieldProblem(key, _clean(str(exc))))
    return good, problems, kept_at


def _original_index(path: str, kept_at: dict[str, list[int]]) -> str:
    match = re.match(r"^(\w+)\[(\d+)\](.*)$", path)
    if not match or match[1] not in kept_at:
        return path
    return f"{match[1]}[{kept_at[match[1]][int(match[2])]}]{match[3]}"


def _grpc_address(text: str) -> bool:
    """Whether `text` names a gRPC server: host:port, or a URL with a host."""
    url = urlsplit(text if "://" in text else f"grpc://{text}")
    if url.scheme not in ("http", "https", "grpc", "grpcs") or not url.hostname:
        return False
    try:
        return url.port is not None or "://" in text
    except ValueError:
        return False


def _semantic_problems(card: AgentCard, *, needs_endpoint: bool) -> list[FieldProblem]:
    problems = []
    seen: set[str] = set()
    for i, skill in enumerate(card.skills):
        if skill.id in seen:
            problems.append(FieldProblem(f"skills[{i}].id", f"duplicate skill id {skill.id!r}"))
        seen.add(skill.id)
    for i, iface in enumerate(card.supported_interfaces):
        if iface.protocol_binding == TransportProtocol.GRPC.value:
            if not _grpc_address(iface.url):
                problems.append(
                    FieldProblem(
                        f"supportedInterfaces[{i}].url",
                        f"must be a gRPC address (host:port, or an http(s) or grpc(s) URL), "
                        f"got {iface.url!r}",
                    )
                )
            continue
        url = urlsplit(iface.url)
        if url.scheme not in ("http", "https") or not url.netloc:
            problems.append(
                FieldProblem(
                    f"supportedInterfaces[{i}].url", f"must be an http(s) URL, got {iface.url!r}"
                )
            )
    if needs_endpoint and not any(
        i.protocol_binding in SUPPORTED_BINDINGS for i in card.supported_interfaces
    ):
        problems.append(
            FieldProblem(
                "supportedInterfaces",
                "an endpoint agent needs at least one interface with protocolBinding "
                f"{' or '.join(SUPPORTED_BINDINGS)} (register it as an inbox agent otherwise)",
            )
        )
    return problems


# The top-level fields of a 0.3 card that a 1.0 card has in another form.
_V03_FIELDS = (
    "url",
    "preferredTransport",
    "protocolVersion",
    "additionalInterfaces",
    "security",
    "supportsAuthenticatedExtendedCard",
)
# A 0.3 security scheme's `type` -> the 1.0 SecurityScheme field that holds it.
_V10_SCHEMES = {
    "apiKey": "apiKeySecurityScheme",
    "http": "httpAuthSecurityScheme",
    "oauth2": "oauth2SecurityScheme",
    "openIdConnect": "openIdConnectSecurityScheme",
    "mutualTLS": "mtlsSecurityScheme",
}


def without_v03_fields(data: dict[str, Any]) -> dict[str, Any]:
    """A card read as A2A 1.0 without the 0.3 fields served beside its own:
    the top-level ones (`url`, `preferredTransport`, `protocolVersion`,
    `additionalInterfaces`, `security`, `supportsAuthenticatedExtendedCard`), a skill's
    `security`, and a security scheme's 0.3 form next to its 1.0 one. Where the 1.0
    counterpart is missing, the 0.3 field is converted as the a2a-sdk's card reader does.
    Anything else is left for the checks to judge; `data` is not changed."""
    card = {k: v for k, v in data.items() if k not in _V03_FIELDS}
    if isinstance(data.get("security"), list) and "securityRequirements" not in data:
        card["securityRequirements"] = _requirements(data["security"])
    if data.get("supportsAuthenticatedExtendedCard") is True:
        capabilities = card.get("capabilities")
        if isinstance(capabilities, dict) and "extendedAgentCard" not in capabilities:
            card["capabilities"] = {**capabilities, "extendedAgentCard": True}
    if isinstance(data.get("skills"), list):
        card["skills"] = [_skill(skill) for skill in data["skills"]]
    if isinstance(data.get("securitySchemes"), dict):
        card["securitySchemes"] = {
            name: _scheme(scheme) for name, scheme in data["securitySchemes"].items()
        }
    return card


def _requirements(legacy: list[Any]) -> Any:
    """0.3 `security` ([{scheme: [scopes]}]) as 1.0 `securityRequirements`."""
    if not all(isinstance(item, dict) for item in legacy):
        return legacy  # not 0.3's form either: the checks say what is wrong with it
    return [{"schemes": {name: {"list": scopes} for name, scopes in i.items()}} for i in legacy]


def _skill(skill: Any) -> Any:
    if not isinstance(skill, dict) or "security" not in skill:
        return skill
    kept = {k: v for k, v in skill.items() if k != "security"}
    if "securityRequirements" not in skill and isinstance(skill["security"], list):
        kept["securityRequirements"] = _requirements(skill["security"])
    return kept


def _scheme(scheme: Any) -> Any:
    if not isinstance(scheme, dict):
        return scheme
    ours = {k: v for k, v in scheme.items() if k in _V10_SCHEMES.values()}
    if ours:
        return ours
    wrapper = _V10_SCHEMES.get(scheme.get("type", ""))
    if wrapper is None:
        return scheme
    body = {k: v for k, v in scheme.items() if k != "type"}
    if "in" in body:
        body["location"] = body.pop("in")
    return {wrapper: body}


def _from_v03(data: dict[str, Any]) -> AgentCard:
    try:
        legacy = types_v03.AgentCard.model_validate(data)
    except ValidationError as exc:
        problems = field_problems(exc.errors(include_url=False))
        raise ValidationFailed("invalid A2A 0.3 agent card", problems) from None
    return to_core_agent_card(legacy)


def check_card(data: Any, *, needs_endpoint: bool) -> CheckedCard:
    """Validate a card (decoded JSON) and return it normalized to A2A 1.0.

    Raises `ValidationFailed` listing every problem found. `needs_endpoint` is true when the
    agent will be reached at its own server, so the card must declare a usable interface.
    """
    if not isinstance(data, dict):
        raise ValidationFailed(
            "an agent card must be a JSON object",
            [FieldProblem("", f"expected an object, got {type(data).__name__}")],
        )
    if holds_lone_surrogate(data):  # protobuf's parser fails on one with a SystemError
        raise ValidationFailed(
            "an agent card must be Unicode text",
            [FieldProblem("", "it holds a lone UTF-16 surrogate (an escape such as \\ud800)")],
        )
    converted_from = None
    if "url" in data and "supportedInterfaces" not in data:
        card = _from_v03(data)
        converted_from = "0.3"
        problems: list[FieldProblem] = []
        kept_at: dict[str, list[int]] = {}
    else:
        good, problems, kept_at = _field_by_field(without_v03_fields(data))
        card = AgentCard()
        try:
            ParseDict(good, card)
        except (ParseError, TypeError, ValueError) as exc:
            problems.append(FieldProblem("", _clean(str(exc))))
    failed = [p.field for p in problems]
    try:
        validate_proto_required_fields(card)
    except InvalidParamsError as exc:
        for error in (exc.data or {}).get("errors", []):
            path = _original_index(_camel_path(error["field"]), kept_at)
            if path == "supportedInterfaces" and not needs_endpoint:
                continue  # an inbox agent is reached through the hub; the hub serves its card
            if not any(path == f or path.startswith((f + ".", f + "[")) for f in failed):
                problems.append(FieldProblem(path, error["message"].rstrip(".")))
    problems.extend(
        FieldProblem(_original_index(p.field, kept_at), p.message)
        for p in _semantic_problems(card, needs_endpoint=needs_endpoint)
    )
    if problems:
        problems.sort(key=lambda p: p.field)
        raise ValidationFailed(f"invalid agent card ({len(problems)} problems)", problems)
    normalized = card_to_dict(card)
    return CheckedCard(
        card=card, data=normalized, digest=card_digest(normalized), converted_from=converted_from
    )


def _camel_path(path: str) -> str:
    """`supported_interfaces[0].protocol_binding` -> `supportedInterfaces[0].protocolBinding`."""

    def camel(word: str) -> str:
        head, *rest = word.split("_")
        return head + "".join(w[:1].upper() + w[1:] for w in rest)

    return ".".join(camel(segment) for segment in path.split("."))
