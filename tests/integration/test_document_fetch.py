"""A turn's document URLs are fetched only where the operator allows: loopback is refused unless allow-listed."""

from __future__ import annotations

from pathlib import Path

import pytest
from inprocess import AskedModel, agent_and_session, serving

from ferryman.safe_fetch import FetchPolicy
from ferryman.server.app import build_services
from ferryman.storage.sqlite import SqliteStore
from support import Proc


@pytest.fixture()
def anyio_backend() -> str:
    return "asyncio"


async def _turn_with_document(tmp_path: Path, url: str, policy: FetchPolicy) -> tuple[int, dict[str, object], str]:
    model = AskedModel()
    model.enqueue_text("Read it.")
    services = build_services(SqliteStore(str(tmp_path / "docs.db")), [model], fetch=policy)
    async with serving(services) as http:
        agent_id, session_id = await agent_and_session(http)
        body = {
            "messages": [{"role": "user", "content": "Which models are listed?"}],
            "documents": [{"content": {"uri": url}, "mime_type": "application/json"}],
            "stream": False,
        }
        answer = await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body)
    seen = str(model.requests[-1]["messages"]) if model.requests else ""
    return answer.status_code, answer.json(), seen


@pytest.mark.anyio
async def test_a_document_on_loopback_is_refused_by_default(tmp_path: Path, scripted_proc: tuple[Proc, str]) -> None:
    status, body, seen = await _turn_with_document(tmp_path, f"{scripted_proc[1]}/v1/models", FetchPolicy())
    assert status == 400, body
    error = body["error"]
    assert isinstance(error, dict) and error["field"] == "documents" and "not a public address" in error["message"]
    assert seen == ""


@pytest.mark.anyio
async def test_a_document_on_an_allow_listed_host_reaches_the_model(
    tmp_path: Path, scripted_proc: tuple[Proc, str]
) -> None:
    policy = FetchPolicy(allowed_hosts=["127.0.0.1"])
    status, body, seen = await _turn_with_document(tmp_path, f"{scripted_proc[1]}/v1/models", policy)
    assert status == 200, body
    assert "scripted-model" in seen
