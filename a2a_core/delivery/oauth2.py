"""OAuth2 client credentials (RFC 6749 §4.4) for agents behind OAuth2: access tokens fetched
from the agent's token endpoint, cached until shortly before they expire.

One cache per event loop (the forwarder's). Per credential, fetches are single-flight: callers
that need a token while one is being fetched wait for that fetch (each at most its own time).
A fetch takes at most `FETCH_SECONDS` and reads at most `MAX_ANSWER` bytes; when it fails, the
failure is kept `FAILURE_SECONDS` and given to the callers meanwhile, so a slow or broken token
endpoint costs only its own agent's callers, each a bounded wait, and it is asked at most once
in that time. Nothing here logs; failures say what the endpoint did, never the secret.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from a2a_core.schemas.credentials import Credential

FETCH_SECONDS = 10.0
FAILURE_SECONDS = 2.0
MAX_ANSWER = 64 * 1024
# A token is renewed this long before it expires (a fifth of its life when that is shorter).
RENEW_BEFORE = 30.0
# A token without `expires_in` is used this long.
DEFAULT_LIFETIME = 300.0
_ERROR_CODE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class TokenUnavailable(Exception):
    """No token could be had; the message says why in the token endpoint's terms."""


class _TokenAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    access_token: str
    token_type: str = "Bearer"
    expires_in: float | None = None


@dataclass(frozen=True)
class _Token:
    value: str
    renew_at: float


class TokenCache:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http
        self._tokens: dict[str, _Token] = {}
        self._fetching: dict[str, asyncio.Future[_Token]] = {}
        self._failed: dict[str, tuple[float, str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def token(self, key: str, credential: Credential) -> str:
        """An access token for `credential` (`key` names it and changes when it does)."""
        now = time.monotonic()
        found = self._tokens.get(key)
        if found is not None and now < found.renew_at:
            return found.value
        failed = self._failed.get(key)
        if failed is not None and now < failed[0]:
            raise TokenUnavailable(failed[1])
        pending = self._fetching.get(key)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._fetching[key] = pending
            task = asyncio.get_running_loop().create_task(self._fetch(key, credential, pending))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        # Shielded: a caller that gives up does not cancel the fetch the others wait for.
        return (await asyncio.shield(pending)).value

    def refused(self, key: str, token: str) -> None:
        """The agent refused `token`: the next call fetches another (unless another call
        already has)."""
        found = self._tokens.get(key)
        if found is not None and found.value == token:
            del self._tokens[key]

    def forget(self, keep: set[str]) -> None:
        for index in (self._tokens, self._failed):
            for key in [k for k in index if k not in keep]:
                del index[key]

    async def _fetch(self, key: str, credential: Credential, done: asyncio.Future[_Token]) -> None:
        try:
            async with asyncio.timeout(FETCH_SECONDS):
                token = await self._ask(credential)
        except TimeoutError:
            self._fail(key, done, f"the token endpoint did not answer within {FETCH_SECONDS:g} s")
        except TokenUnavailable as exc:
            self._fail(key, done, str(exc))
        except httpx.HTTPError as exc:
            self._fail(key, done, f"the token endpoint could not be reached ({type(exc).__name__})")
        except BaseException as exc:  # the waiters must hear of it whatever it was
            self._fail(key, done, f"the token fetch failed ({type(exc).__name__})")
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            self._tokens[key] = token
            self._failed.pop(key, None)
            done.set_result(token)
        finally:
            self._fetching.pop(key, None)

    def _fail(self, key: str, done: asyncio.Future[_Token], why: str) -> None:
        self._failed[key] = (time.monotonic() + FAILURE_SECONDS, why)
        if not done.done():
            done.set_exception(TokenUnavailable(why))
            done.exception()  # retrieved: no "never retrieved" warning when nobody waits

    async def _ask(self, credential: Credential) -> _Token:
        form = {"grant_type": "client_credentials"}
        if credential.scopes:
            form["scope"] = " ".join(credential.scopes)
        began = time.monotonic()
        async with self._http.stream(
            "POST",
            credential.token_url,
            data=form,
            auth=httpx.BasicAuth(credential.client_id, credential.secret),
            headers={"Accept": "application/json"},
            timeout=FETCH_SECONDS,
            follow_redirects=False,
        ) as response:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER:
                    raise TokenUnavailable(
                        f"the token endpoint's answer is larger than {MAX_ANSWER // 1024} KB"
                    )
        status = response.status_code
        kind = response.headers.get("content-type", "").split(";")[0].strip()[:60] or "none"
        try:
            document = json.loads(bytes(body))
        except ValueError:
            raise TokenUnavailable(
                f"the token endpoint answered HTTP {status} with something that is not JSON "
                f"(content type {kind})"
            ) from None
        if status != 200:
            code = document.get("error") if isinstance(document, dict) else None
            said = f" ({code})" if isinstance(code, str) and _ERROR_CODE.match(code) else ""
            refused = "refused the hub's client" if status in (400, 401, 403) else "failed"
            raise TokenUnavailable(f"the token endpoint {refused}: HTTP {status}{said}")
        try:
            answer = _TokenAnswer.model_validate(document)
        except ValidationError as exc:
            where = ", ".join(".".join(map(str, e["loc"])) or "answer" for e in exc.errors()[:3])
            raise TokenUnavailable(
                f"the token endpoint's answer is not a token response (wrong: {where})"
            ) from None
        if answer.token_type.lower() != "bearer":
            raise TokenUnavailable(
                f"the token endpoint issued a {answer.token_type[:20]!r} token, not a bearer token"
            )
        if not answer.access_token or len(answer.access_token) > 8192:
            raise TokenUnavailable("the token endpoint's access_token is empty or too long")
        if not answer.access_token.isprintable() or not answer.access_token.isascii():
            raise TokenUnavailable("the token endpoint's access_token is not a header value")
        life = answer.expires_in if answer.expires_in and answer.expires_in > 0 else None
        life = DEFAULT_LIFETIME if life is None else min(life, 86400.0)
        return _Token(answer.access_token, began + life - min(RENEW_BEFORE, life / 5))
