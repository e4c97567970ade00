"""A fasta2a server (in-memory storage and broker) whose worker completes every task with a
text artifact, no LLM. fasta2a answers `SendMessage` with a submitted task and writes status
timestamps without a UTC offset.

Usage: fasta2a_agent.py PORT NAME
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fasta2a import FastA2A, Worker
from fasta2a.broker import InMemoryBroker
from fasta2a.schema import Artifact, Message, Skill, TaskIdParams, TaskSendParams
from fasta2a.storage import InMemoryStorage


class TextWorker(Worker[Any]):
    async def run_task(self, params: TaskSendParams) -> None:
        text = " ".join(p.get("text", "") for p in params["message"]["parts"])
        await self.storage.update_task(params["id"], state="working")
        artifact = Artifact(
            artifact_id=str(uuid.uuid4()), name="answer", parts=[{"text": f"fasta2a: {text}"}]
        )
        await self.storage.update_task(params["id"], state="completed", new_artifacts=[artifact])

    async def cancel_task(self, params: TaskIdParams) -> None:
        await self.storage.update_task(params["id"], state="canceled")

    def build_message_history(self, history: list[Message]) -> list[Any]:
        return history

    def build_artifacts(self, result: Any) -> list[Artifact]:
        return []


def main() -> None:
    port, name = int(sys.argv[1]), sys.argv[2]
    storage: InMemoryStorage[Any] = InMemoryStorage()
    broker = InMemoryBroker()
    worker = TextWorker(broker=broker, storage=storage)

    @asynccontextmanager
    async def lifespan(app: FastA2A) -> AsyncIterator[None]:
        async with app.task_manager, worker.run():
            yield

    app = FastA2A(
        storage=storage,
        broker=broker,
        name=name,
        url=f"http://127.0.0.1:{port}/",
        skills=[
            Skill(
                id="answer",
                name="Answer",
                description="answers with the text it was sent",
                tags=["test"],
                input_modes=["text/plain"],
                output_modes=["text/plain"],
            )
        ],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        lifespan=lifespan,
    )
    print(f"listening {port}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
