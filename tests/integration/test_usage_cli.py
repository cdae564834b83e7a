"""``client.usage`` and ``ferryman usage`` against the in-process server (authentication off): a table and JSON."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ferryman.cli import main as cli
from ferryman.cli.remote import Output
from ferryman.client import AsyncClient, Client
from ferryman.client.errors import BadRequestError
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from inprocess import Served, check_script, migrated_sqlite, scripted_provider, serving

TURN = {"messages": [{"role": "user", "content": "hi"}], "stream": False}


def _run(model: Served) -> tuple[str, float]:
    """An agent's turn and a response on the scripted model, after every earlier test's runs; the range's start.

    The scripted server counts a word as a token: the turn reads 3 ("Be brief.", "hi") and writes 3, the
    response reads 1 and writes 2."""
    model.wait_settled()
    since = time.time()
    agent = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
    agent_id = model.http.post("/v1/agents", json=agent).json()["agent_id"]
    session_id = model.http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}).json()["session_id"]
    model.enqueue(ScriptedReply(text="one two three"), ScriptedReply(text="four five"))
    assert model.http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=TURN).json()["status"] == (
        "completed"
    )
    assert model.http.post("/v1/responses", json={"model": "scripted-model", "input": "hi"}).status_code == 200
    model.wait_settled()
    return agent_id, since


def _usage(model: Served, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    """What ``ferryman usage ARGV`` prints (stdout, stderr), run on a client of the in-process server."""
    args = cli.parser_for(["usage", *argv]).parse_args(["usage", *argv])
    capsys.readouterr()
    with Client(http_client=model.http_client()) as client:
        assert args.handler(client, args, Output(args.json)) == 0
    printed = capsys.readouterr()
    return printed.out, printed.err


def test_the_sdk_and_the_command_show_what_the_range_used(model: Served, capsys: pytest.CaptureFixture[str]) -> None:
    agent_id, since = _run(model)
    with Client(http_client=model.http_client()) as client:
        summary = client.usage.get(group_by="model", since=since)
    assert [(r.key, r.input_tokens, r.output_tokens, r.total_tokens, r.turns) for r in summary.data] == [
        ("scripted-model", 4, 5, 9, 2)
    ]
    assert summary.since.timestamp() == pytest.approx(since)

    table, _ = _usage(model, capsys, "--since", str(since))
    lines = [line for line in table.splitlines() if agent_id in line or "no agent" in line]
    assert len(lines) == 2 and "agent" in table and "total tokens" in table
    assert [cell.strip() for cell in lines[0].split("│")[1:-1]] == [agent_id, "3", "3", "6", "1"]
    assert [cell.strip() for cell in lines[1].split("│")[1:-1]] == ["(no agent: responses)", "1", "2", "3", "1"]

    document = json.loads(_usage(model, capsys, "--by", "principal", "--since", str(since), "--json")[0])
    assert document["object"] == "usage" and document["group_by"] == "principal"
    assert [{k: row[k] for k in ("key", "total_tokens", "turns")} for row in document["data"]] == [
        {"key": None, "total_tokens": 9, "turns": 2}
    ]
    empty = _usage(model, capsys, "--since", "1970-01-01", "--until", "86400")
    assert empty == ("", "no usage recorded from 1970-01-01 00:00:00 UTC to 1970-01-02 00:00:00 UTC\n")


@pytest.mark.anyio
async def test_the_async_client_reads_usage(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    script = Script()
    store = SqliteStore(migrated_sqlite(tmp_path / "usage.db"))
    services = build_services(store, [scripted_provider(script)], sole_process=True)
    async with serving(services) as http:
        client = AsyncClient(http_client=http)
        summary = await client.usage.get(group_by="agent", since=0, until=time.time())
        assert summary.group_by == "agent" and summary.data == []
        with pytest.raises(BadRequestError) as refused:
            await client.usage.get(since="not a time")
        assert "since" in str(refused.value)
    check_script(request, script)
