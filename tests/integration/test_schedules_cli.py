"""``client.schedules`` (sync and async) and ``ferryman schedules`` against the in-process server.

The schedules here tick once a year (on 1 January): none fires while a test runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ferryman.cli import main as cli
from ferryman.cli.remote import Output
from ferryman.client import AsyncClient, Client
from ferryman.client.errors import BadRequestError, NotFoundError
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from inprocess import Served, serving

YEARLY = "0 0 1 1 *"


def _agent(model: Served) -> str:
    agent = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
    return str(model.http.post("/v1/agents", json=agent).json()["agent_id"])


def _command(model: Served, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What ``ferryman schedules ARGV`` prints on stdout, run on a client of the in-process server."""
    args = cli.parser_for(["schedules", *argv]).parse_args(["schedules", *argv])
    capsys.readouterr()
    with Client(http_client=model.http_client()) as client:
        assert args.handler(client, args, Output(args.json)) == 0
    return capsys.readouterr().out


def test_the_sdk_makes_lists_pauses_resumes_and_deletes_a_schedule(model: Served) -> None:
    agent_id = _agent(model)
    with Client(http_client=model.http_client()) as client:
        made = client.schedules.create(agent_id, YEARLY, "Happy new year?", timezone="Asia/Tokyo")
        assert (made.agent_id, made.timezone, made.paused, made.session_id) == (agent_id, "Asia/Tokyo", False, None)
        assert made.next_run_at is not None
        assert made.id in [s.id for s in client.schedules.list(agent_id=agent_id)]
        assert client.schedules.retrieve(made.id) == made
        assert client.schedules.pause(made.id).paused is True
        assert client.schedules.resume(made.id).next_run_at == made.next_run_at
        assert list(client.schedules.runs(made.id)) == []
        with pytest.raises(BadRequestError, match="timezone"):
            client.schedules.create(agent_id, YEARLY, "m", timezone="Nowhere/Special")
        assert client.schedules.delete(made.id).deleted is True
        with pytest.raises(NotFoundError):
            client.schedules.retrieve(made.id)


def test_the_command_makes_shows_lists_pauses_and_deletes(model: Served, capsys: pytest.CaptureFixture[str]) -> None:
    agent_id = _agent(model)
    made = json.loads(_command(model, capsys, "create", agent_id, YEARLY, "Any news?", "--timezone",
                               "Europe/Berlin", "--json"))  # fmt: skip
    schedule_id = made["id"]
    assert (made["cron"], made["timezone"], made["message"]) == (YEARLY, "Europe/Berlin", "Any news?")
    shown = _command(model, capsys, "show", schedule_id)
    assert schedule_id in shown and "Europe/Berlin" in shown and "a fresh one each run" in shown
    listed = json.loads(_command(model, capsys, "list", "--agent", agent_id, "--json"))
    assert [s["id"] for s in listed] == [schedule_id]
    assert "(paused)" in _command(model, capsys, "pause", schedule_id)
    assert json.loads(_command(model, capsys, "resume", schedule_id, "--json"))["paused"] is False
    assert json.loads(_command(model, capsys, "runs", schedule_id, "--json")) == []
    assert f"deleted schedule {schedule_id}" in _command(model, capsys, "delete", schedule_id)
    assert json.loads(_command(model, capsys, "list", "--agent", agent_id, "--json")) == []


@pytest.mark.anyio
async def test_the_async_client_makes_and_deletes_a_schedule(tmp_path: Path, scripted: ScriptedModel) -> None:
    services = build_services(SqliteStore(str(tmp_path / "ferryman.db")), [scripted], sole_process=True)
    async with serving(services) as http:
        client = AsyncClient(http_client=http)
        agent = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
        agent_id = (await http.post("/v1/agents", json=agent)).json()["agent_id"]
        made = await client.schedules.create(agent_id, YEARLY, "m", paused=True)
        assert (made.paused, made.next_run_at) == (True, None)
        assert [s.id async for s in await client.schedules.list()] == [made.id]
        assert (await client.schedules.resume(made.id)).next_run_at is not None
        assert (await client.schedules.pause(made.id)).paused is True
        assert [r async for r in await client.schedules.runs(made.id)] == []
        assert (await client.schedules.retrieve(made.id)).id == made.id
        assert (await client.schedules.delete(made.id)).deleted is True
