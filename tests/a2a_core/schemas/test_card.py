"""Agent card validation: a valid card is normalized, a malformed one refused with every problem."""

from __future__ import annotations

import pytest
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types.a2a_pb2 import AgentCard
from google.protobuf.json_format import ParseDict

from a2a_core.errors import ValidationFailed
from a2a_core.schemas.card import check_card
from tests.factories import make_card, make_inbox_card


def problems(exc: pytest.ExceptionInfo[ValidationFailed]) -> dict[str, str]:
    return {p.field: p.message for p in exc.value.problems}


def test_valid_card_is_accepted_and_digest_is_stable():
    card = make_card("baron")
    first = check_card(card, needs_endpoint=True)
    again = check_card(dict(reversed(list(card.items()))), needs_endpoint=True)
    assert first.card.name == "baron"
    assert first.digest == again.digest
    assert first.data["skills"][0]["id"] == "echo"


def test_malformed_card_lists_every_problem_at_once():
    card = make_card("baron")
    card["name"] = 5
    card["capabilities"] = "yes"
    card["skills"] = [
        "zz",
        {"id": "a", "name": "n"},
        {"id": "a", "name": "m", "description": "d", "tags": ["t"]},
    ]
    card["supportedInterfaces"] = [{"url": "ftp://x", "protocolBinding": "JSONRPC"}]
    card["bogus"] = True
    del card["defaultInputModes"]
    with pytest.raises(ValidationFailed) as exc:
        check_card(card, needs_endpoint=True)
    found = problems(exc)
    assert found == {
        "bogus": "unknown field for an A2A 1.0 agent card",
        "capabilities": "must be an object, got str",
        "defaultInputModes": "Field must contain at least one element",
        "name": "must be a string, got int",
        "skills[0]": "must be an object, got str",
        "skills[1].description": "Field is required",
        "skills[1].tags": "Field must contain at least one element",
        "skills[2].id": "duplicate skill id 'a'",
        "supportedInterfaces[0].protocolVersion": "Field is required",
        "supportedInterfaces[0].url": "must be an http(s) URL, got 'ftp://x'",
    }
    assert "10 problems" in exc.value.message


def test_endpoint_agent_needs_an_interface_the_hub_speaks():
    card = make_card(
        interfaces=[{"url": "http://x/", "protocolBinding": "SOAP", "protocolVersion": "1.0"}]
    )
    with pytest.raises(ValidationFailed) as exc:
        check_card(card, needs_endpoint=True)
    assert "supportedInterfaces" in problems(exc)


@pytest.mark.parametrize(
    "url", ["127.0.0.1:50051", "grpc://agents.example:443", "https://g.example"]
)
def test_a_grpc_only_endpoint_agent_is_accepted_with_a_grpc_address(url):
    card = make_card(interfaces=[{"url": url, "protocolBinding": "GRPC", "protocolVersion": "1.0"}])
    assert check_card(card, needs_endpoint=True).card.supported_interfaces[0].url == url


@pytest.mark.parametrize("url", ["no-port", "ftp://x:1", ""])
def test_a_grpc_interface_needs_an_address(url):
    card = make_card(interfaces=[{"url": url, "protocolBinding": "GRPC", "protocolVersion": "1.0"}])
    with pytest.raises(ValidationFailed) as exc:
        check_card(card, needs_endpoint=True)
    assert "supportedInterfaces[0].url" in problems(exc)


def test_inbox_agent_card_needs_no_interfaces():
    assert check_card(make_inbox_card("scribe"), needs_endpoint=False).card.name == "scribe"
    with pytest.raises(ValidationFailed) as exc:
        check_card(make_inbox_card("scribe"), needs_endpoint=True)
    assert "supportedInterfaces" in problems(exc)


@pytest.mark.parametrize("junk", [None, [], "card", 7])
def test_card_must_be_an_object(junk):
    with pytest.raises(ValidationFailed):
        check_card(junk, needs_endpoint=False)


def test_a2a_0_3_card_is_converted_to_1_0():
    legacy = {
        "name": "duc",
        "description": "Architecture expert",
        "url": "http://localhost:8003",
        "version": "1.0.0",
        "protocolVersion": "0.3.0",
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text"],
        "defaultOutputModes": ["text"],
        "skills": [
            {
                "id": "architecture_review",
                "name": "Architecture Review",
                "description": "d",
                "tags": ["architecture"],
            }
        ],
    }
    checked = check_card(legacy, needs_endpoint=True)
    assert checked.converted_from == "0.3"
    assert checked.data["supportedInterfaces"][0]["url"] == "http://localhost:8003"
    assert checked.data["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"


def test_malformed_0_3_card_lists_its_problems():
    with pytest.raises(ValidationFailed) as exc:
        check_card({"url": "http://x", "name": "duc"}, needs_endpoint=True)
    assert {"description", "version", "skills"} <= set(problems(exc))


def _secured(card: dict) -> dict:
    card["securitySchemes"] = {
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
        "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}},
    }
    card["securityRequirements"] = [{"schemes": {"bearer": {"list": ["read"]}}}]
    card["skills"][0]["securityRequirements"] = [{"schemes": {"key": {}}}]
    card["supportedInterfaces"].append(
        {"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
    )
    return card


def test_a_1_0_card_served_with_its_0_3_fields_beside_is_the_1_0_card():
    """What an a2a-sdk 1.x server serving 0.3 clients too serves: the 1.0 card merged with
    its 0.3 view (top-level fields, a skill's `security`, each scheme in both forms)."""
    pure = _secured(make_card("duc"))
    served = agent_card_to_dict(ParseDict(pure, AgentCard()))
    assert {"url", "preferredTransport", "security"} <= served.keys()
    assert "type" in served["securitySchemes"]["bearer"]

    checked = check_card(served, needs_endpoint=True)
    assert checked.converted_from is None
    assert checked.digest == check_card(pure, needs_endpoint=True).digest


def test_a_0_3_field_with_no_1_0_counterpart_is_converted():
    card = make_card("duc")
    card.update(
        url="http://127.0.0.1:9/",
        security=[{"bearer": ["read"]}],
        securitySchemes={"bearer": {"type": "http", "scheme": "Bearer"}},
    )
    checked = check_card(card, needs_endpoint=True)
    assert checked.data["securityRequirements"] == [{"schemes": {"bearer": {"list": ["read"]}}}]
    assert checked.data["securitySchemes"] == {
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}
    }
    assert "url" not in checked.data
