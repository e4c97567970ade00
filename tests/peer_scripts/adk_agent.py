"""A Google ADK agent served over A2A by ADK's own `to_a2a`, on a fake model (no network).

Usage: adk_agent.py PORT

The model answers "canned: <the user's text>". A message "wait PATH" makes the model wait
until the file PATH exists (at most a minute), so the task stays working meanwhile.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncGenerator
from pathlib import Path

import uvicorn
from google.adk.a2a.utils.agent_to_a2a import to_a2a
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types


def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


class CannedLlm(BaseLlm):
    """Answers every turn with the user's last text, prefixed; never calls anything."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse]:
        text = ""
        for content in llm_request.contents:
            if content.role == "user":
                text = " ".join(p.text for p in content.parts or [] if p.text)
        command, _, rest = text.partition(" ")
        if command == "wait":
            await asyncio.to_thread(_wait_for, Path(rest), 60)
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=f"canned: {text}")]),
            turn_complete=True,
        )


def main() -> None:
    port = int(sys.argv[1])
    agent = LlmAgent(
        name="adk_canned",
        description="An ADK agent on a canned model",
        instruction="Answer.",
        model=CannedLlm(model="canned"),
    )
    app = to_a2a(agent, host="127.0.0.1", port=port)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
