"""Google ADK's `RemoteA2aAgent` as a client, run by an ADK `Runner` (no model involved).

    adk_client.py CARD_URL TOKEN MODE CONVERSATION [CONVERSATION ...]

Builds a RemoteA2aAgent from the card at CARD_URL (sending `Authorization: Bearer TOKEN`
unless TOKEN is "-"), streaming or not as MODE ("stream" or "send") says. With ADK_CARD=object
in the environment the card is read first (the a2a-sdk's A2ACardResolver, on the same HTTP
client) and the RemoteA2aAgent is given the card rather than its URL: ADK's way for a card
whose interfaces are not all at the card's own origin. Each CONVERSATION is
texts separated by "|", run one after another in an in-memory session of their own, so later
texts continue the conversation the way ADK does. Prints one JSON line per event the runner
yields: {"conversation", "turn", "event"}, the event as ADK dumps it less what is fresh per run
(its id, timestamp, invocation id); a failure prints {"error": ...} and exits 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from urllib.parse import urlsplit

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

FRESH = ("id", "timestamp", "invocation_id")


async def main(card_url: str, token: str, mode: str, *conversations: str) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token != "-" else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=mode == "stream"))
        card: object = card_url
        if os.environ.get("ADK_CARD") == "object":
            parts = urlsplit(card_url)
            resolver = A2ACardResolver(http, f"{parts.scheme}://{parts.netloc}", parts.path)
            card = await resolver.get_agent_card()
        agent = RemoteA2aAgent(name="remote", agent_card=card, a2a_client_factory=factory)
        sessions = InMemorySessionService()
        runner = Runner(app_name="side-by-side", agent=agent, session_service=sessions)
        for number, conversation in enumerate(conversations):
            session = await sessions.create_session(app_name="side-by-side", user_id="user")
            for turn, text in enumerate(conversation.split("|")):
                message = types.Content(role="user", parts=[types.Part(text=text)])
                async for event in runner.run_async(
                    user_id="user", session_id=session.id, new_message=message
                ):
                    dumped = event.model_dump(mode="json", exclude_none=True)
                    for key in FRESH:
                        dumped.pop(key, None)
                    line = {"conversation": number, "turn": turn, "event": dumped}
                    print(json.dumps(line, sort_keys=True), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:]))
    except Exception as exc:  # the test reads what went wrong
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        sys.exit(1)
