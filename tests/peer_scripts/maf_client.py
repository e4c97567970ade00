"""Microsoft Agent Framework's `A2AAgent` as a client (no model involved).

    maf_client.py CARD_URL TOKEN MODE CONVERSATION [CONVERSATION ...]

Reads the agent's card at CARD_URL and builds an A2AAgent from it, both with an HTTP client
that sends `Authorization: Bearer TOKEN` (none when TOKEN is "-"). Each CONVERSATION is texts
separated by "|", sent one `run` after another in one session of their own, streamed or not as
MODE ("stream" or "send") says. Prints one JSON line per response, or per update when streamed:
{"conversation", "turn", "response"}, as the framework's `to_dict` gives it; a failure prints
{"error": ...} and exits 1.
"""

from __future__ import annotations

import asyncio
import json
import sys
from urllib.parse import urlsplit

import httpx
from a2a.client import A2ACardResolver
from agent_framework_a2a import A2AAgent


def emit(conversation: int, turn: int, item: object) -> None:
    line = {"conversation": conversation, "turn": turn, "response": item.to_dict()}  # type: ignore[attr-defined]
    print(json.dumps(line, sort_keys=True, default=str), flush=True)


async def main(card_url: str, token: str, mode: str, *conversations: str) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token != "-" else {}
    parts = urlsplit(card_url)
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        card = await A2ACardResolver(
            http, f"{parts.scheme}://{parts.netloc}", agent_card_path=parts.path
        ).get_agent_card()
        agent = A2AAgent(agent_card=card, http_client=http)
        for number, conversation in enumerate(conversations):
            session = agent.create_session()
            for turn, text in enumerate(conversation.split("|")):
                if mode == "stream":
                    async for update in agent.run(text, stream=True, session=session):
                        emit(number, turn, update)
                else:
                    emit(number, turn, await agent.run(text, session=session))


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:]))
    except Exception as exc:  # the test reads what went wrong
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        sys.exit(1)
