"""``POST /v1/tool-runtime/invoke`` with an ``Idempotency-Key``: a repeat gets the first run's answer, not a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ferryman.api.registry import Tool, ToolInvocationResult
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script
from ferryman.tools.registry import ToolRegistry
from inprocess import migrated_sqlite, scripted_provider, serving

pytestmark = pytest.mark.anyio


class Counter:
    """A tool with an effect: each run counts."""

    definition = Tool(identifier="bump", toolgroup_id="test::effects", description="Bump", parameters=[])

    def __init__(self) -> None:
        self.runs = 0

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        self.runs += 1
        return ToolInvocationResult(content=str(self.runs))


async def test_a_repeated_invocation_with_the_same_key_runs_the_tool_once(tmp_path: Path) -> None:
    counter = Counter()
    tools = ToolRegistry()
    tools.register("test::effects", [counter])
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "invoke.db")), [scripted_provider(Script())], tools=tools,
        sole_process=True,
    )  # fmt: skip
    async with serving(services) as http:
        call = {"tool_name": "bump", "kwargs": {}}
        first = await http.post("/v1/tool-runtime/invoke", json=call, headers={"Idempotency-Key": "k-1"})
        again = await http.post("/v1/tool-runtime/invoke", json=call, headers={"Idempotency-Key": "k-1"})
        other = await http.post("/v1/tool-runtime/invoke", json=call, headers={"Idempotency-Key": "k-2"})
    assert [r.status_code for r in (first, again, other)] == [200, 200, 200]
    assert first.json()["content"] == again.json()["content"] == "1"
    assert again.headers.get("idempotent-replayed") == "true"
    assert other.json()["content"] == "2" and counter.runs == 2
