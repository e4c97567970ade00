"""Junk for the fuzz test, built from fragments of what each entry point expects (method
names, paths, frame types, field names) mixed with wrong types, lone surrogates, integers no
column holds, garbage bytes, deep nesting and oversized values: closer to real mistakes than
uniform noise. Every generator takes the `random.Random` to draw from, so a seed replays it."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

METHODS = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "",
    "Nope",
    None,
    7,
]
REST_PATHS = [
    "message:send",
    "message:stream",
    "tasks",
    "tasks/{id}",
    "tasks/{id}:cancel",
    "tasks/{id}:subscribe",
    "tasks?contextId={id}&pageSize={id}",
    "tasks/{id}/pushNotificationConfigs",
    "card",
    "v1/message:send",
    "v1/message:stream",
    "v1/tasks/{id}",
    "v1/tasks/{id}:cancel",
    "",
    "../../admin",
]
FRAME_TYPES = ["ack", "status", "artifact", "ping", "delivery", "", None, 3, "x" * 300]
FIELDS = [
    "messageId",
    "role",
    "parts",
    "taskId",
    "contextId",
    "metadata",
    "extensions",
    "text",
    "data",
    "deliveryId",
    "deliveryIds",
    "state",
    "append",
    "lastChunk",
    "ref",
    "kind",
    "payload",
    "a2aHub",
    "timeoutSeconds",
    "askHuman",
    "paused",
    "agent",
    "frames",
    "pageSize",
    "historyLength",
]
# The fields of a SendMessage request, its message, a part and its configuration.
SEND_FIELDS = [
    "messageId",
    "message_id",
    "role",
    "parts",
    "taskId",
    "contextId",
    "metadata",
    "extensions",
    "referenceTaskIds",
    "text",
    "data",
    "url",
    "raw",
    "mediaType",
    "acceptedOutputModes",
    "historyLength",
    "returnImmediately",
    "taskPushNotificationConfig",
    "configuration",
    "message",
    "tenant",
]
# Past every integer column: PostgreSQL's bigint, an unsigned 64-bit, one below bigint.
HUGE_INTS = [2**63, 2**64, -(2**63) - 1, 2**31, 10**30]
# Query values for the long-poll's `wait`: the valid ones short, so no poll holds the test up.
WAITS = ["0", "0.01", "-1", "nan", "inf", "1e400", "", "abc", "99", "%ED%A0%80", "0x10", "½"]
# Past the hub's 1 MiB body limit (HUB_MAX_BODY_BYTES).
OVERSIZED = 1024 * 1024 + 100


def surrogate(rng: random.Random) -> str:
    """A lone UTF-16 surrogate, which no UTF-8 text can hold; `json.dumps` (ASCII by default)
    sends it as an escape like "\\ud800", which a JSON parser turns back into the lone code."""
    return chr(rng.randrange(0xD800, 0xE000))


def junk_value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(14 if depth < 6 else 10)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.choice([0, -1, 1e308, float("1e-9"), 3.5, *HUGE_INTS])
    if choice == 3:
        return "".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(0, 40)))
    if choice == 4:
        return rng.choice(
            [
                "<script>x</script>",
                "\u0000",
                "\ud800",
                "x\udfffy",
                "ROLE_USER",
                "TASK_STATE_WORKING",
                "completed",
                "working",
                "💥",
                "' OR 1=1 --",
            ]
        )
    if choice == 5:
        return "x" * rng.choice([0, 1, 1000, 200_000])
    if choice == 6:
        return rng.choice(["", "a2ah_fake", "00000000-0000-0000-0000-000000000000"])
    if choice == 7:
        return rng.randrange(-5, 10**6)
    if choice == 8:
        return f"a{surrogate(rng)}b" if rng.random() < 0.5 else surrogate(rng)
    if choice == 9:
        return rng.choice(HUGE_INTS)
    if choice in (10, 11):
        return {rng.choice(FIELDS): junk_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))}
    return [junk_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]


def junk_id(rng: random.Random) -> Any:
    """A JSON-RPC id or a delivery id: often one no integer column or UTF-8 text holds."""
    roll = rng.random()
    if roll < 0.3:
        return rng.choice(HUGE_INTS)
    if roll < 0.5:
        return surrogate(rng) + "-id"
    return junk_value(rng)


def junk_body(rng: random.Random, shape: dict[str, Any]) -> bytes:
    """Under the body limit, unless the shape's own junk (a 200,000-character string or two)
    happens to pass it."""
    roll = rng.random()
    if roll < 0.1:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
    if roll < 0.2:
        return json.dumps(shape)[: rng.randrange(0, 60)].encode()
    if roll < 0.25:
        return b"[" * 5000 + b"]" * 5000
    if roll < 0.3:
        return json.dumps([shape, shape]).encode()
    body = dict(shape)
    for _ in range(rng.randrange(1, 4)):
        body[rng.choice([*FIELDS, *shape])] = junk_value(rng)
    return json.dumps(body).encode()


def query_text(value: Any) -> str:
    """A junk value as a query parameter: a string as it is (NUL included), else its JSON."""
    if (isinstance(value, str) and value.isprintable()) or value == "\x00":
        return value[:300]
    return json.dumps(value)[:300]


def rpc_shape(rng: random.Random) -> dict[str, Any]:
    message = {
        "messageId": rng.choice([f"fz-{rng.randrange(10**9)}", junk_id(rng)]),
        "role": "ROLE_USER",
        "parts": [{"text": rng.choice(["echo hi", "fail boom", "ask what?", "x"])}],
    }
    params: Any = {"message": message} if rng.random() < 0.7 else junk_value(rng)
    if isinstance(params, dict) and rng.random() < 0.5:
        # Junk inside an otherwise plain SendMessage, which the JSON-RPC relay reads itself.
        where = rng.choice(
            [message, message["parts"][0], params.setdefault("configuration", {}), params]
        )
        where[rng.choice(SEND_FIELDS)] = junk_value(rng)
    return {
        "jsonrpc": rng.choice(["2.0", "1.0", None]),
        "id": junk_id(rng),
        "method": rng.choice(METHODS),
        "params": params,
    }


def junk_frame(rng: random.Random) -> dict[str, Any]:
    """An inbox or dashboard frame: a type, and some fields of the right names and wrong
    values; ack frames often with ids past every integer column."""
    frame: dict[str, Any] = {"type": rng.choice(FRAME_TYPES)}
    frame.update({rng.choice(FIELDS): junk_value(rng) for _ in range(rng.randrange(0, 4))})
    if frame["type"] == "ack" and rng.random() < 0.5:
        frame[rng.choice(["deliveryId", "deliveryIds"])] = rng.choice(
            [junk_id(rng), [junk_id(rng), 1]]
        )
    return frame


def frame_text(rng: random.Random, frame: dict[str, Any]) -> str:
    return json.dumps(frame) if rng.random() < 0.85 else junk_body(rng, frame).decode("latin-1")


def poll_body(rng: random.Random) -> bytes:
    """A long-poll POST: one frame, a batch of frames, or not a frame at all."""
    roll = rng.random()
    if roll < 0.5:
        return frame_text(rng, junk_frame(rng)).encode()
    if roll < 0.8:
        frames: Any = [junk_frame(rng) for _ in range(rng.randrange(0, 4))]
        if rng.random() < 0.1:
            frames = [{"type": "ping"}] * 101
        return json.dumps({"frames": frames}).encode()
    return junk_body(rng, {"frames": junk_value(rng)})


# --- Agents' own identities: JWT-shaped tokens, JWKS answers, Host headers -----------------

JWT_HEADER_FIELDS = ["alg", "kid", "typ", "crit", "b64", "jku", "x5u", "cty"]
JWT_CLAIMS = ["iss", "sub", "aud", "exp", "nbf", "iat", "jti", "azp"]
ODD_NUMBERS = [float("inf"), float("-inf"), float("nan"), -(10**30), 10**30, 1e308, -1, 0]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def junk_header(rng: random.Random, kid: str, jku: str) -> Any:
    """A JWS protected header with the right names and often the wrong types or values."""
    if rng.random() < 0.1:
        return junk_value(rng)
    header: dict[str, Any] = {
        "alg": rng.choice(["ES256", "ES256", "RS256", "none", "HS256", "", None, 5, ["ES256"], {}]),
        "kid": rng.choice([kid, kid, "unknown", "", None, 7, [kid], {"kid": kid}, "k" * 5000]),
        "jku": rng.choice(
            [
                jku,
                jku,
                "https://127.0.0.1:9/jwks.json",
                "file:///etc/passwd",
                "http://[::1",
                "",
                None,
                3,
                [jku],
                {"url": jku},
            ]
        ),
    }
    for name in rng.sample(["typ", "crit", "b64", "x5u", "jwk"], rng.randrange(0, 3)):
        header[name] = junk_value(rng)
    for name in [n for n in list(header) if rng.random() < 0.15]:
        del header[name]
    return header


def junk_jws(rng: random.Random, real: dict[str, str], kid: str, jku: str) -> dict[str, str]:
    """A signature object of the right shape (two strings) holding a junk JWS: the real one
    with a character changed, or a signature over a junk header, or not base64url at all."""
    if rng.random() < 0.3:
        changed = dict(real)
        part = rng.choice(["protected", "signature"])
        at = rng.randrange(len(changed[part]))
        changed[part] = changed[part][:at] + rng.choice("A_-z0.=") + changed[part][at + 1 :]
        return changed
    header = json.dumps(junk_header(rng, kid, jku)).encode()
    encoded = rng.choice(
        [header, header, header, b"[" * 3000 + b"]" * 3000, b"1" * 5000, bytes(range(20))]
    )
    return {
        "protected": rng.choice([_b64(encoded), _b64(encoded), "%%%", "a.b"]),
        "signature": rng.choice([real["signature"], _b64(b"x" * 64), "***"]),
    }


def wrong_types(rng: random.Random, real: dict[str, str]) -> Any:
    """A signature that is not an object, or an object with wrong types in it."""
    if rng.random() < 0.3:
        return junk_value(rng)
    item: dict[str, Any] = {
        "protected": rng.choice([real["protected"], junk_value(rng)]),
        "signature": rng.choice([real["signature"], junk_value(rng), None]),
    }
    if rng.random() < 0.3:
        item["header"] = junk_value(rng)
    if rng.random() < 0.2:
        item[rng.choice(FIELDS)] = junk_value(rng)
    return item


def junk_signatures(rng: random.Random, real: dict[str, str], kid: str, jku: str) -> Any:
    """A card's `signatures`: not a list; more than the hub checks; signatures with wrong
    types in them; or well-typed signatures holding junk JWS (the real one among them
    sometimes)."""
    roll = rng.random()
    if roll < 0.05:
        return junk_value(rng)
    if roll < 0.08:
        return [real] * 20
    count = rng.randrange(1, 4)
    if roll < 0.4:
        items: list[Any] = [wrong_types(rng, real) for _ in range(count)]
    else:
        items = [junk_jws(rng, real, kid, jku) for _ in range(count)]
    if rng.random() < 0.15:
        items.insert(rng.randrange(len(items) + 1), real)
    return items


def _jwt_part(rng: random.Random, good: dict[str, Any], fields: list[str]) -> bytes:
    """A token's header or claims: often `good` with some members junk, sometimes no object at
    all, now and then no JSON."""
    roll = rng.random()
    if roll < 0.08:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))
    if roll < 0.18:
        return json.dumps(junk_value(rng)).encode()
    part = dict(good)
    for _ in range(rng.randrange(0, 3)):
        name = rng.choice(fields)
        part[name] = rng.choice([junk_value(rng), rng.choice(ODD_NUMBERS)])
    if rng.random() < 0.1:
        del part[rng.choice(list(part))]
    return json.dumps(part).encode()


def junk_jwt(
    rng: random.Random, header: dict[str, Any], claims: dict[str, Any], sign: Any
) -> str | bytes:
    """A token shaped like a JWT: the `header` and `claims` of a valid one with junk of any
    type in some members, signed with `sign(signing input) -> signature` (so that only what it
    holds is wrong) or not, and then perhaps damaged: padding, non-ASCII, dots, truncation.
    Bytes when it holds what only raw header bytes carry."""
    signing_input = (
        f"{_b64(_jwt_part(rng, header, JWT_HEADER_FIELDS))}."
        f"{_b64(_jwt_part(rng, claims, JWT_CLAIMS))}"
    )
    signature = sign(signing_input.encode()) if rng.random() < 0.8 else rng.randbytes(64)
    token = f"{signing_input}.{_b64(signature)}"
    roll = rng.random()
    if roll < 0.05:
        return token.replace(".", "==.", 1)
    if roll < 0.1:
        at = rng.randrange(len(token))
        return (token[:at] + rng.choice(["é", "\u00ff", " ", "+", "/"]) + token[at:]).encode(
            "latin-1"
        )
    if roll < 0.13:
        return token[: rng.randrange(len(token))]
    if roll < 0.16:
        return rng.choice(["..", "a..", ".b.", "x.y.z", "=.=.=", token + "."])
    return token


def jwks_answer(rng: random.Random, good: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """A JWKS endpoint's answer (status, headers, body): the `good` key set now and then,
    otherwise junk of some kind: HTML, no JSON, JSON of the wrong shape, keys of junk members
    (beside the good one or not), a body past the hub's limit, a redirect."""
    json_type = {"content-type": "application/json"}
    roll = rng.random()
    if roll < 0.3:
        return 200, json_type, json.dumps(good).encode()
    if roll < 0.4:
        return 200, {"content-type": "text/html"}, b"<html><body>Sign in</body></html>"
    if roll < 0.5:
        return 200, json_type, junk_body(rng, good)
    if roll < 0.6:
        return 200, json_type, json.dumps(junk_value(rng)).encode()
    if roll < 0.8:
        members = [
            {
                **rng.choice(good["keys"]),
                rng.choice(["kty", "crv", "x", "y", "alg", "use", "kid"]): junk_value(rng),
            }
            for _ in range(rng.randrange(1, 4))
        ]
        if rng.random() < 0.5:
            members.append(rng.choice(good["keys"]))
        rng.shuffle(members)
        return 200, json_type, json.dumps({"keys": members}).encode()
    if roll < 0.85:
        return 200, json_type, b'{"keys": [], "pad": "' + b"x" * 300_000 + b'"}'
    if roll < 0.9:
        return (
            302,
            {"location": rng.choice(["/jwks.json", "file:///etc/passwd", "http://[::1"])},
            b"",
        )
    return rng.choice([404, 500, 502]), {"content-type": "text/plain"}, b"no"


JUNK_HOSTS = [
    "",
    "junk host",
    "a..b",
    "[::1",
    "[::1]:99999",
    "x:99999",
    "localhost:abc",
    "localhost:-1",
    "evil.example",
    "<script>alert(1)</script>",
    "ex%41mple.com",
    "a/b?c#d",
    "127.0.0.1:0",
    "-.example",
    "xn--.example",
]


def junk_host(rng: random.Random) -> bytes:
    """A Host header value no hub answers to, as the raw bytes of the header."""
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(JUNK_HOSTS).encode()
    if roll < 0.8:
        return bytes(
            rng.choice([*range(0x21, 0x7F), *range(0xA0, 0x100)])
            for _ in range(rng.randrange(1, 40))
        )
    return b"h" * rng.choice([254, 256, 1000, 6000])
