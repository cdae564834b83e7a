"""A run's usage record is written off its stream's critical path: the stream ends without waiting for it,
and ``GET /v1/usage`` (or the app's stop) waits for the writes still under way, so nothing is lost or missed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from storage_backends import unopened_store

from ferryman.server.app import build_services
from ferryman.storage.domain.kinds import USAGE
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.protocol import Kernel
from ferryman.testing import ScriptedModel, ScriptedReply
from inprocess import serving

pytestmark = pytest.mark.anyio


class GatedUsage:
    """A kernel whose writes of usage records wait until :attr:`gate` opens (everything else goes through)."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)

    async def write(self, batch: Sequence[ops.Op]) -> list[Any]:
        if any(isinstance(op, ops.Put) and op.kind == USAGE for op in batch):
            self.waiting.set()
            await self.gate.wait()
        return await self._kernel.write(batch)


async def test_a_turns_stream_ends_without_waiting_for_its_usage_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted = ScriptedModel(model_ids=("m",))
    async with unopened_store("sqlite", tmp_path) as store:
        services = build_services(store, [scripted])
        async with serving(services) as http:
            gated = GatedUsage(store.kernel)
            monkeypatch.setattr(services.usage, "_kernel", gated)
            agent = {"agent_config": {"model": "m", "instructions": "Be brief."}}
            agent_id = (await http.post("/v1/agents", json=agent)).json()["agent_id"]
            session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
            turn_url = f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"
            scripted.enqueue(ScriptedReply(text="one two three"))
            body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
            streamed = asyncio.create_task(http.post(turn_url, json=body))
            try:
                async with asyncio.timeout(10):
                    await gated.waiting.wait()
                # The stream (read whole by the in-process transport) ends while the usage write still waits.
                async with asyncio.timeout(5):
                    answer = await streamed
            except BaseException:
                gated.gate.set()  # the app can stop
                raise
            assert answer.status_code == 200 and "turn_complete" in answer.text
            summary = asyncio.create_task(http.get("/v1/usage", params={"group_by": "model", "since": 0}))
            await asyncio.sleep(0)
            gated.gate.set()
            async with asyncio.timeout(10):
                rows = (await summary).json()["data"]
    # The summary waited for the write under way: the run is counted.
    assert [(row["key"], row["output_tokens"], row["turns"]) for row in rows] == [("m", 3, 1)]
