"""``/v1/schedules`` in process, on a clock the test sets: schedules made, listed, paused and deleted over HTTP,
and ticks fired by one look of the scheduler (``Scheduler.fire_due``), whose turns the scripted model answers.

The scheduler's own loop is off (``schedules.fire``): each test looks when its clock says a tick came.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration_helpers import assert_error, message_text

from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.schedule_settings import ScheduleSettings
from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from inprocess import serving

pytestmark = pytest.mark.anyio

MODEL = "scripted-model"
ALICE = Principal(PrincipalKind.SUBJECT, "alice")
BOB = Principal(PrincipalKind.SUBJECT, "bob")
RED_ALICE = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red",)})
RED_BOB = Principal(PrincipalKind.SUBJECT, "bob", {"teams": ("red",)})
LIFETIME = ScheduleSettings().subject_lifetime_seconds
MONDAY_6_UTC = datetime(2025, 6, 2, 6, 0, tzinfo=UTC).timestamp()
"""08:00 in Berlin (summer time): the clock's start."""
NINE_IN_BERLIN = int(datetime(2025, 6, 2, 7, 0, tzinfo=UTC).timestamp())


class Clock:
    """The time the services read, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Server:
    http: httpx.AsyncClient
    services: Services
    clock: Clock

    async def agent(self) -> str:
        body = {"agent_config": {"model": MODEL, "instructions": "Be brief."}}
        response = await self.http.post("/v1/agents", json=body)
        assert response.status_code == 200, response.text
        return str(response.json()["agent_id"])

    async def session(self, agent_id: str) -> str:
        response = await self.http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "daily"})
        assert response.status_code == 200, response.text
        return str(response.json()["session_id"])

    async def schedule(self, **body: Any) -> dict[str, Any]:
        response = await self.http.post("/v1/schedules", json={"cron": "0 9 * * *", "message": "Any news?", **body})
        assert response.status_code == 200, response.text
        created: dict[str, Any] = response.json()
        return created

    async def runs(self, schedule_id: str) -> list[dict[str, Any]]:
        response = await self.http.get(f"/v1/schedules/{schedule_id}/runs")
        assert response.status_code == 200, response.text
        runs: list[dict[str, Any]] = response.json()["data"]
        return runs


@pytest.fixture()
async def server(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[Server]:
    clock = Clock(MONDAY_6_UTC)
    settings = ScheduleSettings(fire=False, max_message_chars=100, max_per_principal=3, min_interval_seconds=300)
    services = build_services(
        SqliteStore(str(tmp_path / "ferryman.db")), [scripted], sole_process=True, schedules=settings, clock=clock
    )
    async with serving(services) as http:
        yield Server(http, services, clock)


async def test_a_schedule_is_created_listed_read_paused_resumed_and_deleted(server: Server) -> None:
    http = server.http
    agent_id = await server.agent()
    created = await server.schedule(agent_id=agent_id, timezone="Europe/Berlin")
    assert created["object"] == "schedule" and created["id"].startswith("sched_")
    assert (created["next_run_at"], created["paused"], created["session_id"]) == (NINE_IN_BERLIN, False, None)
    other = await server.schedule(agent_id=agent_id, cron="@hourly")
    listing = (await http.get("/v1/schedules")).json()
    assert listing["object"] == "list" and [s["id"] for s in listing["data"]] == [other["id"], created["id"]]
    assert (listing["first_id"], listing["last_id"], listing["has_more"]) == (other["id"], created["id"], False)
    first = (await http.get("/v1/schedules", params={"limit": 1, "order": "asc"})).json()
    assert [s["id"] for s in first["data"]] == [created["id"]] and first["has_more"] is True
    rest = (await http.get("/v1/schedules", params={"limit": 1, "order": "asc", "after": created["id"]})).json()
    assert [s["id"] for s in rest["data"]] == [other["id"]] and rest["has_more"] is False
    assert (await http.get(f"/v1/schedules/{created['id']}")).json() == created

    paused = (await http.post(f"/v1/schedules/{created['id']}", json={"paused": True})).json()
    assert (paused["paused"], paused["next_run_at"]) == (True, None)
    server.clock.now = NINE_IN_BERLIN + 60  # resumed after its tick: the next one is tomorrow's
    resumed = (await http.post(f"/v1/schedules/{created['id']}", json={"paused": False})).json()
    assert (resumed["paused"], resumed["next_run_at"]) == (False, NINE_IN_BERLIN + 86_400)

    deleted = (await http.delete(f"/v1/schedules/{created['id']}")).json()
    assert deleted == {"id": created["id"], "object": "schedule.deleted", "deleted": True}
    assert_error(await http.get(f"/v1/schedules/{created['id']}"), 404)
    assert_error(await http.delete(f"/v1/schedules/{created['id']}"), 404)
    assert [s["id"] for s in (await http.get("/v1/schedules")).json()["data"]] == [other["id"]]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * * *"}, "cron"),
        ({"cron": "0 0 30 2 *"}, "cron"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"timezone": "../etc/passwd"}, "timezone"),
        ({"message": "x" * 101}, "message"),
        ({"message": ""}, "message"),
    ],
)
async def test_what_a_schedule_names_is_checked_when_it_is_made(
    server: Server, change: dict[str, Any], field: str
) -> None:
    agent_id = await server.agent()
    body = {"agent_id": agent_id, "cron": "0 9 * * *", "message": "Any news?", **change}
    error = assert_error(await server.http.post("/v1/schedules", json=body), 400)
    assert error["field"] == field, error
    assert (await server.http.get("/v1/schedules")).json()["data"] == []


@pytest.mark.parametrize("change", [{"agent_id": "no-such-agent"}, {"session_id": "no-such-session"}])
async def test_a_schedule_naming_a_missing_agent_or_session_is_not_found(
    server: Server, change: dict[str, Any]
) -> None:
    agent_id = await server.agent()
    body = {"agent_id": agent_id, "cron": "0 9 * * *", "message": "Any news?", **change}
    assert_error(await server.http.post("/v1/schedules", json=body), 404)
    assert (await server.http.get("/v1/schedules")).json()["data"] == []


async def test_a_principal_holds_at_most_max_per_principal_schedules(server: Server) -> None:
    agent_id = await server.agent()
    for _ in range(3):
        await server.schedule(agent_id=agent_id)
    error = assert_error(await server.http.post("/v1/schedules", json={"agent_id": agent_id, "cron": "@daily",
                                                                       "message": "m"}), 400)  # fmt: skip
    assert "schedules.max_per_principal" in error["message"]


async def test_a_tick_starts_a_turn_in_the_schedules_session_answered_by_the_model(
    server: Server, scripted: ScriptedModel
) -> None:
    agent_id = await server.agent()
    session_id = await server.session(agent_id)
    schedule = await server.schedule(agent_id=agent_id, session_id=session_id, timezone="Europe/Berlin")
    scheduler = server.services.scheduler
    assert await scheduler.fire_due() == []  # 08:00 in Berlin: not yet

    server.clock.now = NINE_IN_BERLIN + 2
    scripted.enqueue_text("Nothing new today.")
    (run,) = await scheduler.fire_due()
    await scheduler.settled()
    assert (run.scheduled_at, run.session_id, run.created_at) == (NINE_IN_BERLIN, session_id, NINE_IN_BERLIN + 2)
    (listed,) = await server.runs(schedule["id"])
    assert listed["object"] == "schedule.run" and listed["id"] == run.id
    assert (listed["status"], listed["turn_id"], listed["session_id"]) == ("completed", run.turn_id, session_id)
    turn = (await server.http.get(f"/v1/agents/{agent_id}/session/{session_id}/turn/{run.turn_id}")).json()
    assert turn["input_messages"][0]["content"] == "Any news?"
    assert turn["output_message"]["content"] == "Nothing new today."
    assert "Any news?" in message_text(scripted.requests[0]["messages"][-1])
    stored = (await server.http.get(f"/v1/schedules/{schedule['id']}")).json()
    assert (stored["last_run_at"], stored["next_run_at"]) == (NINE_IN_BERLIN, NINE_IN_BERLIN + 86_400)
    assert await scheduler.fire_due() == []  # this tick ran: the next is tomorrow's

    # Down for three days: the missed ticks make one run, and the next tick is the first after now.
    server.clock.now = NINE_IN_BERLIN + 3 * 86_400 + 600
    scripted.enqueue_text("Welcome back.")
    (late,) = await scheduler.fire_due()
    await scheduler.settled()
    assert late.scheduled_at == NINE_IN_BERLIN + 86_400 and late.created_at == int(server.clock.now)
    stored = (await server.http.get(f"/v1/schedules/{schedule['id']}")).json()
    assert stored["next_run_at"] == NINE_IN_BERLIN + 4 * 86_400
    assert [r["id"] for r in await server.runs(schedule["id"])] == [late.id, run.id]
    session = (await server.http.get(f"/v1/agents/{agent_id}/session/{session_id}")).json()
    assert [t["turn_id"] for t in session["turns"]] == [run.turn_id, late.turn_id]


async def test_without_a_session_each_tick_opens_a_fresh_one(server: Server, scripted: ScriptedModel) -> None:
    agent_id = await server.agent()
    schedule = await server.schedule(agent_id=agent_id, cron="*/5 * * * *")
    ids = []
    for minutes in (5, 10):
        server.clock.now = MONDAY_6_UTC + minutes * 60 + 1
        scripted.enqueue_text(f"run at {minutes}")
        (run,) = await server.services.scheduler.fire_due()
        await server.services.scheduler.settled()
        ids.append(run.session_id)
    assert len(set(ids)) == 2 and None not in ids
    sessions = (await server.http.get(f"/v1/agents/{agent_id}/sessions")).json()["data"]
    assert sorted(s["session_id"] for s in sessions) == sorted(ids)
    assert [r["status"] for r in await server.runs(schedule["id"])] == ["completed", "completed"]


async def test_a_paused_schedule_does_not_fire_and_a_resumed_one_fires_from_now(
    server: Server, scripted: ScriptedModel
) -> None:
    agent_id = await server.agent()
    schedule = await server.schedule(agent_id=agent_id, paused=True)
    assert (schedule["paused"], schedule["next_run_at"]) == (True, None)
    server.clock.now = NINE_IN_BERLIN + 86_400
    assert await server.services.scheduler.fire_due() == []
    resumed = (await server.http.post(f"/v1/schedules/{schedule['id']}", json={"paused": False})).json()
    tick = int(datetime(2025, 6, 3, 9, 0, tzinfo=UTC).timestamp())  # 09:00 UTC, after now (07:00 UTC on the 3rd)
    assert resumed["next_run_at"] == tick
    paused = await server.http.post(f"/v1/schedules/{schedule['id']}", json={"paused": True})
    assert paused.json()["paused"] is True
    server.clock.now = tick + 60
    assert await server.services.scheduler.fire_due() == []
    assert await server.runs(schedule["id"]) == []


async def test_a_deleted_agent_fails_the_run_and_pauses_its_schedule(server: Server) -> None:
    agent_id = await server.agent()
    schedule = await server.schedule(agent_id=agent_id, cron="@hourly")
    assert (await server.http.delete(f"/v1/agents/{agent_id}")).status_code == 200
    server.clock.now = MONDAY_6_UTC + 3601
    (run,) = await server.services.scheduler.fire_due()
    assert (run.status, run.turn_id) == ("failed", None) and run.error and agent_id in run.error
    stored = (await server.http.get(f"/v1/schedules/{schedule['id']}")).json()
    assert (stored["paused"], stored["next_run_at"]) == (True, None)
    assert [r["status"] for r in await server.runs(schedule["id"])] == ["failed"]


async def test_a_schedule_is_its_owners_and_its_runs_act_as_the_owner(server: Server, scripted: ScriptedModel) -> None:
    http = server.http
    with acting_as(ALICE):
        agent_id = await server.agent()
        schedule = await server.schedule(agent_id=agent_id, cron="@hourly")
    with acting_as(BOB):
        assert_error(await http.get(f"/v1/schedules/{schedule['id']}"), 404)
        assert_error(await http.get(f"/v1/schedules/{schedule['id']}/runs"), 404)
        assert_error(await http.post(f"/v1/schedules/{schedule['id']}", json={"paused": True}), 404)
        assert_error(await http.delete(f"/v1/schedules/{schedule['id']}"), 404)
        assert (await http.get("/v1/schedules")).json()["data"] == []
        body = {"agent_id": agent_id, "cron": "@daily", "message": "mine now"}
        assert_error(await http.post("/v1/schedules", json=body), 404)  # her agent is missing to him
    server.clock.now = MONDAY_6_UTC + 3601
    scripted.enqueue_text("Hello, Alice.")
    (run,) = await server.services.scheduler.fire_due()
    await server.services.scheduler.settled()
    session_url = f"/v1/agents/{agent_id}/session/{run.session_id}"
    with acting_as(BOB):
        assert_error(await http.get(session_url), 404)
    with acting_as(ALICE):
        turns = (await http.get(session_url)).json()["turns"]
        assert [t["output_message"]["content"] for t in turns] == ["Hello, Alice."]
        assert [r["status"] for r in await server.runs(schedule["id"])] == ["completed"]


async def test_the_count_is_each_principals_own_not_that_of_everyone_sharing_a_team(server: Server) -> None:
    with acting_as(RED_ALICE):
        agent_id = await server.agent()
        for _ in range(3):
            await server.schedule(agent_id=agent_id)
        body = {"agent_id": agent_id, "cron": "@daily", "message": "m"}
        assert "schedules.max_per_principal" in assert_error(await server.http.post("/v1/schedules", json=body),
                                                             400)["message"]  # fmt: skip
    with acting_as(RED_BOB):
        await server.schedule(agent_id=await server.agent())


@pytest.mark.parametrize("cron", ["*/2 * * * *", "0,3 9 * * *", "0,58 0,23 * * *"])
async def test_ticks_closer_than_min_interval_seconds_are_refused(server: Server, cron: str) -> None:
    body = {"agent_id": await server.agent(), "cron": cron, "message": "m"}
    error = assert_error(await server.http.post("/v1/schedules", json=body), 400)
    assert error["field"] == "cron" and "schedules.min_interval_seconds" in error["message"], error


async def test_resuming_an_active_schedule_keeps_its_due_tick(server: Server, scripted: ScriptedModel) -> None:
    agent_id = await server.agent()
    schedule = await server.schedule(agent_id=agent_id, timezone="Europe/Berlin")
    server.clock.now = NINE_IN_BERLIN + 2  # due, not fired yet
    resumed = (await server.http.post(f"/v1/schedules/{schedule['id']}", json={"paused": False})).json()
    assert (resumed["paused"], resumed["next_run_at"]) == (False, NINE_IN_BERLIN)
    scripted.enqueue_text("On time.")
    (run,) = await server.services.scheduler.fire_due()
    await server.services.scheduler.settled()
    assert run.scheduled_at == NINE_IN_BERLIN


async def test_an_unexpected_failure_fails_its_run_and_the_look_goes_on(
    server: Server, scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id = await server.agent()
    first = await server.schedule(agent_id=agent_id, cron="@hourly")
    second = await server.schedule(agent_id=agent_id, cron="@hourly")
    agents = server.services.agents
    start_turn = agents.start_turn
    calls: list[str] = []

    async def breaks_once(*args: Any, **kwargs: Any) -> Any:
        calls.append("start")
        if len(calls) == 1:
            raise RuntimeError("a bug, with a detail no caller should read")
        return await start_turn(*args, **kwargs)

    monkeypatch.setattr(agents, "start_turn", breaks_once)
    server.clock.now = MONDAY_6_UTC + 3601
    scripted.enqueue_text("Still here.")
    failed, started = await server.services.scheduler.fire_due()
    await server.services.scheduler.settled()
    assert (failed.schedule_id, failed.status, failed.turn_id) == (first["id"], "failed", None)
    assert failed.error and "detail" not in failed.error and "log" in failed.error
    assert [r["status"] for r in await server.runs(first["id"])] == ["failed"]
    assert [r["status"] for r in await server.runs(second["id"])] == ["completed"]
    sessions = (await server.http.get(f"/v1/agents/{agent_id}/sessions")).json()["data"]
    assert [s["session_id"] for s in sessions] == [started.session_id]  # the refused run's session is gone


async def test_a_subjects_schedule_acts_as_it_only_until_acts_until_and_its_resume_renews_it(
    server: Server, scripted: ScriptedModel
) -> None:
    http = server.http
    mine = await server.schedule(agent_id=await server.agent(), paused=True)
    assert mine["acts_until"] is None  # the server's own: no end
    with acting_as(RED_ALICE):
        agent_id = await server.agent()
        schedule = await server.schedule(agent_id=agent_id, cron="@hourly")
    assert schedule["acts_until"] == int(MONDAY_6_UTC) + LIFETIME
    server.clock.now = MONDAY_6_UTC + LIFETIME + 1
    (lapsed,) = await server.services.scheduler.fire_due()
    assert (lapsed.status, lapsed.turn_id) == ("failed", None)
    assert lapsed.error and "schedules.subject_lifetime_seconds" in lapsed.error
    url = f"/v1/schedules/{schedule['id']}"
    with acting_as(RED_ALICE):
        assert (await http.get(url)).json()["paused"] is True
    with acting_as(ALICE):  # no longer on the red team: resuming would act with the team it had
        assert_error(await http.post(url, json={"paused": False}), 409)
    with acting_as(RED_ALICE):
        resumed = (await http.post(url, json={"paused": False})).json()
        assert (resumed["paused"], resumed["acts_until"]) == (False, int(server.clock.now) + LIFETIME)
        server.clock.now += 60
        renewed = (await http.post(url, json={"paused": False})).json()  # active: renewed, its tick kept
        assert (renewed["acts_until"], renewed["next_run_at"]) == (resumed["acts_until"] + 60, resumed["next_run_at"])
    server.clock.now = resumed["next_run_at"] + 1
    scripted.enqueue_text("Renewed.")
    (run,) = await server.services.scheduler.fire_due()
    await server.services.scheduler.settled()
    with acting_as(RED_ALICE):
        assert [r["status"] for r in await server.runs(schedule["id"])] == ["completed", "failed"]
