"""``Idempotency-Key`` on every create and run, in process over the scripted model and a SQLite file."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient
from store_records import sessions_of

from ferryman.api.agents import TurnError
from ferryman.api.content import Message
from ferryman.errors import NotFoundError
from ferryman.inference.local_embeddings import LocalEmbeddingProvider
from ferryman.server.app import Services, build_services, create_app
from ferryman.services.agents import AgentService
from ferryman.services.host import TurnHost
from ferryman.services.idempotency import IdempotencyKeys
from ferryman.storage.base import IdempotencyRecord, KeySettlement, SessionRecord
from ferryman.storage.domain.agents import agents, sessions
from ferryman.storage.domain.conversations import conversations
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import AskedModel, RefusingModel, migrated_sqlite
from sse import Frame, frames

pytestmark = pytest.mark.anyio

KEY = "Idempotency-Key"
NOW = datetime.now(UTC)
REPLAYED = "idempotent-replayed"
WEATHER = {"name": "get_weather", "description": "weather", "parameters": []}
RESUME = {"tool_responses": [{"call_id": "c1", "tool_name": "get_weather", "content": "sun"}]}


class WatchedStore(SqliteStore):
    """SQLite, telling when a key's first call stored its outcome (alone, or with the turn it started)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.completed = asyncio.Event()
        self.completions = 0  # outcomes stored on their own, not with the record their call wrote

    async def complete_idempotency_key(self, claim: IdempotencyRecord, result: str, expires_at: datetime) -> bool:
        done = await super().complete_idempotency_key(claim, result, expires_at)
        self.completions += 1
        self.completed.set()
        return done

    async def start_turn(self, *args: Any, settle: KeySettlement | None = None, **kwargs: Any) -> list[Message]:
        history = await super().start_turn(*args, settle=settle, **kwargs)
        if settle is not None:
            self.completed.set()
        return history


@pytest.fixture()
def store(tmp_path: Path) -> WatchedStore:
    return WatchedStore(migrated_sqlite(tmp_path / "idem.db"))


@asynccontextmanager
async def client_over(store: SqliteStore, model: ScriptedModel) -> AsyncIterator[httpx.AsyncClient]:
    """A client of one app instance (a replica) over ``store``."""
    # The local embedding model loads when first asked to embed: vector stores made here only read its size.
    services: Services = build_services(store, [model, LocalEmbeddingProvider()])
    await services.store.open()
    await services.models.refresh()
    try:
        transport = httpx.ASGITransport(app=create_app(services))
        async with httpx.AsyncClient(transport=transport, base_url="http://ferryman", timeout=30) as client:
            yield client
    finally:
        await services.runner.shutdown()
        await services.store.close()


@pytest.fixture()
async def http(store: WatchedStore, scripted: AskedModel) -> AsyncIterator[httpx.AsyncClient]:
    async with client_over(store, scripted) as client:
        yield client


def frames_of(response: httpx.Response) -> list[Frame]:
    return list(frames(response))


def kind(frame: Frame) -> str:
    data = frame.json()
    return "error" if "error" in data else str(data["event"]["payload"]["event_type"])


async def post(http: httpx.AsyncClient, url: str, body: dict[str, Any], key: str) -> httpx.Response:
    return await http.post(url, json=body, headers={KEY: key})


async def twice(http: httpx.AsyncClient, url: str, body: dict[str, Any], key: str) -> httpx.Response:
    """POST twice with one key; check the repeat is the first answer, replayed; return the first."""
    first = await post(http, url, body, key)
    again = await post(http, url, body, key)
    assert first.status_code == 200, first.text
    assert REPLAYED not in first.headers
    assert (again.status_code, again.content, again.headers.get(REPLAYED)) == (200, first.content, "true")
    return first


async def new_agent(http: httpx.AsyncClient, **config: Any) -> str:
    body = {"agent_config": {"model": "scripted-model", "instructions": "test", **config}}
    response = await http.post("/v1/agents", json=body)
    return str(response.json()["agent_id"])


async def new_session(http: httpx.AsyncClient, agent_id: str) -> str:
    response = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    return str(response.json()["session_id"])


async def turn_url(http: httpx.AsyncClient, **config: Any) -> str:
    """The turn URL of a new session of a new agent."""
    agent_id = await new_agent(http, **config)
    return f"/v1/agents/{agent_id}/session/{await new_session(http, agent_id)}/turn"


async def weather_turn(http: httpx.AsyncClient, scripted: AskedModel) -> str:
    """The turn URL of a new session of an agent with the weather client tool, the model's next reply calling it
    (``RESUME`` answers that call)."""
    url = await turn_url(http, client_tools=[WEATHER])
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
    return url


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("prefix", ["/v1", "/v1alpha"])
async def test_agent_and_session_creates_return_the_first_ids(http: httpx.AsyncClient, prefix: str) -> None:
    body = {"agent_config": {"model": "scripted-model", "instructions": "test"}}
    agent_id = (await twice(http, f"{prefix}/agents", body, "agent-key")).json()["agent_id"]
    # The two prefixes are one API: the key means the same request under either.
    other = "/v1alpha" if prefix == "/v1" else "/v1"
    assert (await post(http, f"{other}/agents", body, "agent-key")).json()["agent_id"] == agent_id
    assert len((await http.get("/v1/agents")).json()["data"]) == 1
    await twice(http, f"{prefix}/agents/{agent_id}/session", {"session_name": "s"}, "session-key")
    assert len((await http.get(f"/v1/agents/{agent_id}/sessions")).json()["data"]) == 1


async def test_agent_and_session_keys_are_stored_with_their_records(
    http: httpx.AsyncClient, store: WatchedStore
) -> None:
    """The write that stores the agent (the session) claims its key and stores its outcome: no claim before it, no
    completion after, nothing a crash between two writes could leave half done; a repeat answers from the id."""
    body = {"agent_config": {"model": "scripted-model", "instructions": "test"}}
    agent_id = (await twice(http, "/v1/agents", body, "agent-key")).json()["agent_id"]
    session_id = (await twice(http, f"/v1/agents/{agent_id}/session", {"session_name": "s"}, "session-key")).json()[
        "session_id"
    ]
    assert store.completions == 0
    for key, outcome in (("agent-key", ["agent", agent_id]), ("session-key", ["session", session_id])):
        held = await store.claim_idempotency_key(IdempotencyRecord("", key, "probe", "fp", NOW, NOW), NOW)
        assert held is not None and json.loads(held.result or "") == {"record": outcome}
    await http.delete(f"/v1/agents/{agent_id}")  # a repeat still answers as the first call did
    again = await post(http, "/v1/agents", body, "agent-key")
    assert (again.json(), again.headers[REPLAYED]) == ({"agent_id": agent_id}, "true")


async def test_files_and_registrations_store_their_answer_with_their_record(
    http: httpx.AsyncClient, store: WatchedStore
) -> None:
    """An upload's, a model's, a toolgroup's, a shield's, a vector store's (and its file's and batch's) and a vector
    DB's write claims its key and stores the answer it gives (known before the write): a repeat gets it byte for
    byte, also once the record is gone, and nothing is completed after the write."""
    form = {"file": ("notes.txt", b"some notes", "text/plain")}
    uploaded = [await http.post("/v1/files", files=form, data={"purpose": "assistants"}, headers={KEY: "file-key"})
                for _ in range(2)]  # fmt: skip
    assert [answer.status_code for answer in uploaded] == [200, 200]
    assert (uploaded[1].content, uploaded[1].headers.get(REPLAYED)) == (uploaded[0].content, "true")
    assert [f["id"] for f in (await http.get("/v1/files")).json()["data"]] == [uploaded[0].json()["id"]]
    registrations = {
        "/v1/models": {"model_id": "alias", "provider_id": "scripted", "provider_model_id": "scripted-model"},
        "/v1/toolgroups": {"toolgroup_id": "sums", "provider_id": "builtin::math"},
        "/v1/shields": {"shield_id": "no-secrets", "provider_id": "ferryman-local"},
        "/v1/vector_stores": {"name": "docs"},
        "/v1/vector-dbs": {"vector_db_id": "notes", "embedding_model": "all-MiniLM-L6-v2"},
    }
    firsts = {url: await twice(http, url, body, f"{url}-key") for url, body in registrations.items()}
    store_url = f"/v1/vector_stores/{firsts['/v1/vector_stores'].json()['id']}"
    file_id = uploaded[0].json()["id"]
    attached = await twice(http, f"{store_url}/files", {"file_id": file_id}, "attach-key")
    assert attached.json()["status"] == "in_progress"
    batch = await twice(http, f"{store_url}/file_batches", {"file_ids": [file_id]}, "batch-key")
    assert batch.json()["file_counts"]["in_progress"] == 1
    assert store.completions == 0
    for url, first in firsts.items():
        held = await store.claim_idempotency_key(IdempotencyRecord("", f"{url}-key", "probe", "fp", NOW, NOW), NOW)
        assert held is not None and json.loads(held.result or "")["body"] == first.text
    await http.delete("/v1/toolgroups/sums")
    again = await post(http, "/v1/toolgroups", registrations["/v1/toolgroups"], "/v1/toolgroups-key")
    assert (again.content, again.headers[REPLAYED]) == (firsts["/v1/toolgroups"].content, "true")
    assert [group["identifier"] for group in (await http.get("/v1/toolgroups")).json()["data"]].count("sums") == 0


async def test_conversations_schedules_and_forks_store_their_key_with_their_record(
    http: httpx.AsyncClient, store: WatchedStore, scripted: AskedModel
) -> None:
    """A conversation's create, items and fork, a schedule's create and a session's fork each claim their key in
    the write that stores the record: nothing is completed after it, and a repeat is the first answer."""
    items = [{"type": "message", "role": "user", "content": "hello"}]
    conversation = (await twice(http, "/v1/conversations", {"items": items}, "conv-key")).json()
    added = await twice(http, f"/v1/conversations/{conversation['id']}/items", {"items": items}, "items-key")
    listed = (await http.get(f"/v1/conversations/{conversation['id']}/items", params={"order": "asc"})).json()
    assert [item["id"] for item in listed["data"]][1:] == [item["id"] for item in added.json()["data"]]
    item_id = listed["data"][0]["id"]
    fork = (await twice(http, f"/v1/conversations/{conversation['id']}/fork", {"item_id": item_id}, "fork-key")).json()
    assert fork["id"] != conversation["id"]
    agent_id = await new_agent(http)
    session_id = await new_session(http, agent_id)
    scripted.enqueue_text("kept")
    session_url = f"/v1/agents/{agent_id}/session/{session_id}"
    turn = (await post(http, f"{session_url}/turn", {"messages": user("hi"), "stream": False}, "t")).json()
    forked = await twice(http, f"{session_url}/fork", {"turn_id": turn["turn_id"]}, "session-fork-key")
    sessions = (await http.get(f"/v1/agents/{agent_id}/sessions")).json()["data"]
    assert sorted(s["session_id"] for s in sessions) == sorted([session_id, forked.json()["session_id"]])
    body = {"agent_id": agent_id, "cron": "0 0 1 1 *", "message": "Happy new year"}
    await twice(http, "/v1/schedules", body, "schedule-key")
    assert store.completions == 0


async def test_a_repeated_conversation_create_leaves_one_conversation_and_one_session(
    http: httpx.AsyncClient, store: WatchedStore
) -> None:
    """A conversation and its session are one write with the key: a repeat finds the key held and writes
    neither (no session is left behind by it)."""
    first = await twice(http, "/v1/conversations", {}, "conv-key")
    await post(http, "/v1/conversations", {}, "conv-key")
    assert [s.session_id for s in await sessions(store.kernel).all(parent=None)] == [await _session_of(store, first)]


async def _session_of(store: WatchedStore, created: httpx.Response) -> str:
    return (await conversations(store.kernel).get(created.json()["id"])).session_id


async def test_a_repeated_fork_at_a_paused_turn_leaves_one_fork(
    http: httpx.AsyncClient, store: WatchedStore, scripted: AskedModel
) -> None:
    """A fork copying a paused turn takes its key once the copy is whole; a repeat is answered with that fork."""
    weather = {"name": "get_weather", "description": "Weather", "parameters": []}
    agent_id = await new_agent(http, client_tools=[weather])
    session_id = await new_session(http, agent_id)
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
    session_url = f"/v1/agents/{agent_id}/session/{session_id}"
    paused = (await http.post(f"{session_url}/turn", json={"messages": user("hi"), "stream": False})).json()
    assert paused["status"] == "awaiting_input", paused
    fork = await twice(http, f"{session_url}/fork", {"turn_id": paused["turn_id"]}, "fork-key")
    listed = (await http.get(f"/v1/agents/{agent_id}/sessions")).json()["data"]
    assert sorted(s["session_id"] for s in listed) == sorted([session_id, fork.json()["session_id"]])
    (copy,) = next(s for s in listed if s["session_id"] == fork.json()["session_id"])["turns"]
    assert copy["status"] == "awaiting_input"
    assert store.completions == 0


async def test_a_registration_repeated_as_it_stands_keeps_its_answer_for_its_key(
    http: httpx.AsyncClient, store: WatchedStore
) -> None:
    """Registering a toolgroup again as it stands writes nothing to store the key with: the key is claimed and
    its answer kept after, as a call that claimed first would have."""
    body = {"toolgroup_id": "sums", "provider_id": "builtin::math"}
    assert (await http.post("/v1/toolgroups", json=body)).status_code == 200
    first = await twice(http, "/v1/toolgroups", body, "again-key")
    assert store.completions == 1
    assert first.json()["identifier"] == "sums"


async def test_a_session_undone_because_its_agent_went_forgets_its_key_first(
    http: httpx.AsyncClient, store: WatchedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent is deleted as the session is written: the session is removed again, and the key with it (before
    it), so the key keeps the 404 its call answered, not the session."""
    agent_id = await new_agent(http)
    create = store.create_session

    async def agent_deleted_meanwhile(session: SessionRecord, **kwargs: Any) -> None:
        await create(session, **kwargs)
        assert await agents(store.kernel).delete(agent_id)

    monkeypatch.setattr(store, "create_session", agent_deleted_meanwhile)
    url = f"/v1/agents/{agent_id}/session"
    first, again = [await post(http, url, {"session_name": "s"}, "undone") for _ in range(2)]
    assert (first.status_code, again.status_code, again.headers[REPLAYED]) == (404, 404, "true")
    held = await store.claim_idempotency_key(IdempotencyRecord("", "undone", "probe", "fp", NOW, NOW), NOW)
    assert held is not None and json.loads(held.result or "")["status"] == 404
    assert (await sessions_of(store, agent_id)).items == []


async def test_a_refused_agent_body_is_kept_for_its_key(http: httpx.AsyncClient) -> None:
    body = {"agent_config": {"model": "no-such-model", "instructions": "test"}}
    first, again = [await post(http, "/v1/agents", body, "bad-agent") for _ in range(2)]
    assert (first.status_code, again.status_code, again.headers[REPLAYED]) == (400, 400, "true")
    assert again.content == first.content


async def test_conversation_item_and_model_creates_return_the_first_result(http: httpx.AsyncClient) -> None:
    items = [{"type": "message", "role": "user", "content": "hello"}]
    conversation = (await twice(http, "/v1/conversations", {"items": items}, "conv-key")).json()
    added = (await twice(http, f"/v1/conversations/{conversation['id']}/items", {"items": items}, "items-key")).json()
    listed = (await http.get(f"/v1/conversations/{conversation['id']}/items")).json()["data"]
    assert len(listed) == 2 and added["data"][0]["id"] in {item["id"] for item in listed}
    body = {"model_id": "alias", "provider_id": "scripted", "provider_model_id": "scripted-model"}
    await twice(http, "/v1/models", body, "model-key")


async def test_a_repeated_schedule_create_makes_one_schedule(http: httpx.AsyncClient) -> None:
    body = {"agent_id": await new_agent(http), "cron": "0 0 1 1 *", "message": "Happy new year"}
    first = (await twice(http, "/v1/schedules", body, "schedule-key")).json()
    assert [s["id"] for s in (await http.get("/v1/schedules")).json()["data"]] == [first["id"]]
    other = (await post(http, "/v1/schedules", body, "another-key")).json()
    assert other["id"] != first["id"]
    assert len((await http.get("/v1/schedules")).json()["data"]) == 2


async def test_a_repeated_turn_returns_the_first_turn_and_runs_the_model_once(
    http: httpx.AsyncClient, scripted: AskedModel
) -> None:
    agent_id = await new_agent(http)
    session_id = await new_session(http, agent_id)
    scripted.enqueue_text("only once")
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    turn = (await twice(http, url, {"messages": user("hi"), "stream": False}, "turn-key")).json()
    assert turn["output_message"]["content"] == "only once"
    assert len(scripted.requests) == 1


async def test_a_repeated_streamed_turn_replays_its_events_without_running_again(
    http: httpx.AsyncClient, scripted: AskedModel
) -> None:
    agent_id = await new_agent(http)
    session_id = await new_session(http, agent_id)
    scripted.enqueue_text("streamed once")
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    body = {"messages": user("hi"), "stream": True}
    first = await post(http, url, body, "stream-key")
    again = await post(http, url, body, "stream-key")
    assert frames_of(again) == frames_of(first) and kind(frames_of(first)[-1]) == "turn_complete"
    assert again.headers[REPLAYED] == "true"
    assert len(scripted.requests) == 1


async def test_a_streamed_runs_key_is_stored_with_the_run_it_starts(
    http: httpx.AsyncClient, scripted: AskedModel, store: WatchedStore
) -> None:
    url = await weather_turn(http, scripted)
    scripted.enqueue_text("sunny")
    scripted.enqueue_text("stored")
    paused = frames_of(await post(http, url, {"messages": user("weather?"), "stream": True}, "start-key"))
    turn_id = paused[0].json()["event"]["payload"]["turn_id"]
    resume = {**RESUME, "stream": True}
    await post(http, f"{url}/{turn_id}/resume", resume, "resume-key")
    await post(http, "/v1/responses", {"model": "scripted-model", "input": "hi", "stream": True}, "response-key")
    assert store.completions == 0  # each outcome went in with the turn, the resume or the response


async def test_a_repeated_streamed_run_replays_only_that_run_of_its_turn(
    http: httpx.AsyncClient, scripted: AskedModel
) -> None:
    url = await weather_turn(http, scripted)
    scripted.enqueue_text("sunny")
    paused = frames_of(await post(http, url, {"messages": user("weather?"), "stream": True}, "start-key"))
    turn_id = paused[0].json()["event"]["payload"]["turn_id"]
    resume = {**RESUME, "stream": True}
    resumed = frames_of(await post(http, f"{url}/{turn_id}/resume", resume, "resume-key"))
    assert kind(paused[-1]) == "turn_awaiting_input" and kind(resumed[-1]) == "turn_complete"

    assert frames_of(await post(http, f"{url}/{turn_id}/resume", resume, "resume-key")) == resumed
    assert frames_of(await post(http, url, {"messages": user("weather?"), "stream": True}, "start-key")) == paused
    assert len(scripted.requests) == 2


async def test_a_repeated_non_streamed_resume_returns_the_first_turn(
    http: httpx.AsyncClient, scripted: AskedModel
) -> None:
    url = await weather_turn(http, scripted)
    scripted.enqueue_text("sunny")
    turn_id = (await http.post(url, json={"messages": user("weather?"), "stream": False})).json()["turn_id"]
    resume = {**RESUME, "stream": False}
    turn = (await twice(http, f"{url}/{turn_id}/resume", resume, "resume-key")).json()
    assert turn["status"] == "completed" and len(scripted.requests) == 2


async def test_repeated_responses_return_or_replay_the_first_one(http: httpx.AsyncClient, scripted: AskedModel) -> None:
    scripted.enqueue_text("plain")
    plain = (await twice(http, "/v1/responses", {"model": "scripted-model", "input": "hi"}, "resp-key")).json()
    assert plain["status"] == "completed"
    scripted.enqueue_text("streamed")
    body = {"model": "scripted-model", "input": "hi", "stream": True}
    first = frames_of(await post(http, "/v1/responses", body, "resp-stream-key"))
    again = await post(http, "/v1/responses", body, "resp-stream-key")
    assert frames_of(again) == first and again.headers[REPLAYED] == "true"
    assert (first[0].event, first[-1].event) == ("response.created", "response.completed")
    assert len(scripted.requests) == 2


async def test_the_same_key_with_another_body_is_a_422(http: httpx.AsyncClient) -> None:
    body = {"agent_config": {"model": "scripted-model", "instructions": "one"}}
    await post(http, "/v1/agents", body, "reused")
    other = await post(http, "/v1/agents", {"agent_config": {**body["agent_config"], "instructions": "two"}}, "reused")
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused"
    elsewhere = await post(http, "/v1/conversations", {}, "reused")
    assert elsewhere.status_code == 422
    # The same JSON written otherwise is the same request.
    raw = json.dumps({"agent_config": {"instructions": "one", "model": "scripted-model"}}, indent=2)
    same = await http.post("/v1/agents", content=raw, headers={KEY: "reused", "content-type": "application/json"})
    assert same.status_code == 200 and same.headers[REPLAYED] == "true"


def reading_a_run(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event set once a run's events are read (a repeat found the run stored with its key, and follows it)."""
    following = asyncio.Event()
    original = TurnHost.events

    async def events(host: TurnHost, stream: str, *args: Any) -> Any:
        following.set()
        return await original(host, stream, *args)

    monkeypatch.setattr(TurnHost, "events", events)
    return following


async def test_a_repeat_while_the_first_turn_runs_waits_for_its_answer_and_never_runs_again(
    http: httpx.AsyncClient, scripted: AskedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id = await new_agent(http)
    session_id = await new_session(http, agent_id)
    scripted.enqueue(ScriptedReply(text="held", gate="hold"))
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    body = {"messages": user("hi"), "stream": False}
    following = reading_a_run(monkeypatch)
    first = asyncio.create_task(post(http, url, body, "held-key"))
    await scripted.asked.wait()
    repeat = asyncio.create_task(post(http, url, body, "held-key"))
    await following.wait()
    scripted.script.open_gate("hold")
    answered, repeated = await first, await repeat
    assert answered.status_code == 200 and answered.json()["output_message"]["content"] == "held"
    assert (repeated.status_code, repeated.content, repeated.headers[REPLAYED]) == (200, answered.content, "true")
    assert len(scripted.requests) == 1


async def test_a_repeat_while_a_resume_runs_waits_for_its_answer_and_never_runs_again(
    http: httpx.AsyncClient, scripted: AskedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = await weather_turn(http, scripted)
    scripted.enqueue(ScriptedReply(text="sunny", gate="hold"))
    turn_id = (await http.post(url, json={"messages": user("weather?"), "stream": False})).json()["turn_id"]
    resume = {**RESUME, "stream": False}
    following = reading_a_run(monkeypatch)
    first = asyncio.create_task(post(http, f"{url}/{turn_id}/resume", resume, "held-key"))
    while len(scripted.requests) < 2:
        await scripted.asked.wait()
        scripted.asked.clear()
    # The turn runs, so the repeat is refused before any write, then finds the key the resume's write claimed.
    repeat = asyncio.create_task(post(http, f"{url}/{turn_id}/resume", resume, "held-key"))
    await following.wait()
    scripted.script.open_gate("hold")
    answered, repeated = await first, await repeat
    assert answered.status_code == 200 and answered.json()["output_message"]["content"] == "sunny"
    assert (repeated.status_code, repeated.content, repeated.headers[REPLAYED]) == (200, answered.content, "true")
    again = await post(http, f"{url}/{turn_id}/resume", resume, "held-key")
    assert again.content == answered.content and len(scripted.requests) == 2


async def test_a_repeated_turn_is_answered_as_its_run_ended_even_after_a_resume(
    http: httpx.AsyncClient, scripted: AskedModel
) -> None:
    url = await weather_turn(http, scripted)
    scripted.enqueue_text("sunny")
    body = {"messages": user("weather?"), "stream": False}
    paused = await post(http, url, body, "paused-key")
    assert paused.json()["status"] == "awaiting_input", paused.text
    resume = {**RESUME, "stream": False}
    resumed = await http.post(f"{url}/{paused.json()['turn_id']}/resume", json=resume)
    assert resumed.json()["status"] == "completed"
    again = await post(http, url, body, "paused-key")
    assert (again.content, again.headers[REPLAYED]) == (paused.content, "true") and len(scripted.requests) == 2


async def test_a_turn_that_failed_with_a_client_error_is_kept_and_replayed(store: WatchedStore) -> None:
    model = RefusingModel()
    async with client_over(store, model) as http:
        url = await turn_url(http)
        body = {"messages": user("hi"), "stream": False}
        failed = await post(http, url, body, "refused-key")
        assert failed.status_code == 400 and failed.json()["error"]["code"] == "invalid_request", failed.text
        again = await post(http, url, body, "refused-key")
    assert (again.status_code, again.json(), again.headers[REPLAYED]) == (400, failed.json(), "true")
    assert len(model.requests) == 1


async def test_a_repeat_of_a_running_stream_follows_the_same_run(
    http: httpx.AsyncClient, scripted: AskedModel, store: WatchedStore
) -> None:
    agent_id = await new_agent(http)
    session_id = await new_session(http, agent_id)
    scripted.enqueue(ScriptedReply(text="held stream", gate="hold"))
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    body = {"messages": user("hi"), "stream": True}
    first = asyncio.create_task(post(http, url, body, "live-key"))
    await asyncio.wait_for(store.completed.wait(), 10)  # the first frame went out: the run is named
    await scripted.asked.wait()
    second = asyncio.create_task(post(http, url, body, "live-key"))
    scripted.script.open_gate("hold")
    frames = frames_of(await first)
    assert frames_of(await second) == frames and kind(frames[-1]) == "turn_complete"
    assert len(scripted.requests) == 1


async def test_a_first_call_that_failed_on_the_server_gives_the_key_back(
    http: httpx.AsyncClient, scripted: AskedModel
) -> None:
    url = await turn_url(http)
    body = {"messages": user("hi"), "stream": False}
    scripted.enqueue_error()
    failed = await post(http, url, body, "retry-key")
    assert failed.status_code >= 500
    scripted.enqueue_text("second try")
    retried = await post(http, url, body, "retry-key")
    assert retried.status_code == 200 and REPLAYED not in retried.headers


async def test_a_client_error_is_kept_and_replayed(http: httpx.AsyncClient) -> None:
    missing = await post(http, "/v1/agents/nope/session", {"session_name": "s"}, "404-key")
    again = await post(http, "/v1/agents/nope/session", {"session_name": "s"}, "404-key")
    assert (missing.status_code, again.status_code) == (404, 404)
    assert again.content == missing.content and again.headers[REPLAYED] == "true"


@pytest.mark.parametrize(("key", "status"), [("k" * 255, 200), ("k" * 256, 400), ("", 400)])
async def test_keys_are_one_to_255_characters(http: httpx.AsyncClient, key: str, status: int) -> None:
    body = {"agent_config": {"model": "scripted-model", "instructions": "test"}}
    response = await post(http, "/v1/agents", body, key)
    assert response.status_code == status, response.text


async def test_routes_that_create_nothing_ignore_the_key(http: httpx.AsyncClient) -> None:
    agent_id = await new_agent(http)
    answers = [await http.get(f"/v1/agents/{agent_id}", headers={KEY: "k"}) for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200] and REPLAYED not in answers[1].headers


async def test_keys_hold_across_restarts_and_replicas(tmp_path: Path, scripted: AskedModel) -> None:
    db = str(tmp_path / "shared.db")
    body = {"agent_config": {"model": "scripted-model", "instructions": "test"}}
    async with client_over(SqliteStore(db), scripted) as first_replica:
        created = await post(first_replica, "/v1/agents", body, "durable")
        async with client_over(SqliteStore(db), scripted) as second_replica:
            again = await post(second_replica, "/v1/agents", body, "durable")
            assert again.content == created.content and again.headers[REPLAYED] == "true"
    async with client_over(SqliteStore(db), scripted) as restarted:
        after = await post(restarted, "/v1/agents", body, "durable")
        assert after.content == created.content and len((await restarted.get("/v1/agents")).json()["data"]) == 1


def test_the_app_starts_with_the_middleware_and_keys_work_in_it(tmp_path: Path) -> None:
    services = build_services(SqliteStore(str(tmp_path / "lifespan.db")), [ScriptedModel()])
    with TestClient(create_app(services)) as client:  # runs the lifespan, which opens the store
        first, again = (client.post("/v1/conversations", json={}, headers={KEY: "k"}) for _ in range(2))
        assert first.status_code == 200 and again.json() == first.json() and again.headers[REPLAYED] == "true"


async def test_a_streamed_response_that_is_not_stored_runs_again_once_it_ended(
    http: httpx.AsyncClient, scripted: AskedModel
) -> None:
    scripted.enqueue(ScriptedReply(text="unstored", gate="hold"))
    body = {"model": "scripted-model", "input": "hi", "stream": True, "store": False}
    first = asyncio.create_task(post(http, "/v1/responses", body, "unstored-key"))
    await scripted.asked.wait()
    busy = await post(http, "/v1/responses", body, "unstored-key")  # nothing to replay it from: not a 2nd run
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "idempotency_key_in_use"
    scripted.script.open_gate("hold")
    assert frames_of(await first)[-1].event == "response.completed"
    scripted.enqueue_text("again")
    again = await post(http, "/v1/responses", body, "unstored-key")  # gone once it ended: it runs again
    assert frames_of(again)[-1].event == "response.completed" and REPLAYED not in again.headers
    assert len(scripted.requests) == 2


async def test_the_provider_data_header_is_part_of_the_request(http: httpx.AsyncClient) -> None:
    body = {"agent_config": {"model": "scripted-model", "instructions": "one"}}
    first = await http.post("/v1/agents", json=body, headers={KEY: "pd-key", "X-LlamaStack-Provider-Data": "{}"})
    assert first.status_code == 200
    other = await http.post(
        "/v1/agents", json=body, headers={KEY: "pd-key", "X-LlamaStack-Provider-Data": '{"api_key": "k2"}'}
    )
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused"


async def test_a_turn_whose_run_failed_on_the_server_after_its_call_was_gone_runs_again_on_a_retry(
    http: httpx.AsyncClient, scripted: AskedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = await turn_url(http)
    body = {"messages": user("hi"), "stream": False}
    scripted.enqueue_error()
    with monkeypatch.context() as gone:  # the first call's replica dies as its run fails: it gives nothing back
        gone.setattr(IdempotencyKeys, "give_back", _nothing)
        failed = await post(http, url, body, "orphan-key")
    assert failed.status_code >= 500
    repeat = await post(http, url, body, "orphan-key")  # the run's 5xx is not kept: the key goes back
    assert repeat.status_code == 409 and repeat.json()["error"]["code"] == "idempotency_key_in_use", repeat.text
    scripted.enqueue_text("second try")
    retried = await post(http, url, body, "orphan-key")
    assert retried.status_code == 200 and REPLAYED not in retried.headers
    assert len(scripted.requests) == 2


async def _nothing(*args: Any) -> None:
    return None


async def _not_found(*args: Any) -> AsyncIterator[Any]:
    raise NotFoundError("turn not found")


async def _no_events(*args: Any) -> AsyncIterator[Any]:
    """``turn_events`` of a run whose events stop short of its end (none at all)."""

    async def empty() -> AsyncIterator[Any]:
        return
        yield  # pragma: no cover  (makes this a generator)

    return empty()


@pytest.mark.parametrize(
    ("stored", "forgotten"),
    # Gone (before its events are read, or after): the key goes back, so a retry runs; unfinished: still held.
    [("gone-before-read", True), (None, True), ("in_progress", False), ("failed", True)],
    ids=["turn-gone-before-its-events-are-read", "turn-gone", "turn-unfinished", "turn-failed-upstream"],
)
async def test_a_repeat_whose_run_left_no_last_event_answers_from_the_turn_as_stored(
    http: httpx.AsyncClient,
    scripted: AskedModel,
    monkeypatch: pytest.MonkeyPatch,
    stored: str | None,
    forgotten: bool,
) -> None:
    url = await turn_url(http)
    body = {"messages": user("hi"), "stream": False}
    scripted.enqueue_text("done")
    first = await post(http, url, body, "short-key")
    turn = first.json()
    original_get_turn = AgentService.get_turn

    async def as_stored(service: AgentService, *args: str) -> Any:
        if stored is None:
            raise NotFoundError("turn not found")
        found = await original_get_turn(service, *args)
        error = {"code": "upstream_error", "message": "the model failed"} if stored == "failed" else None
        return found.model_copy(update={"status": stored, "error": TurnError.model_validate(error) if error else None})

    if stored == "gone-before-read":
        monkeypatch.setattr(AgentService, "turn_events", _not_found)
    else:
        monkeypatch.setattr(AgentService, "turn_events", _no_events)  # its events stop short of the run's end
    monkeypatch.setattr(AgentService, "get_turn", as_stored)
    repeat = await post(http, url, body, "short-key")
    assert repeat.status_code == 409 and repeat.json()["error"]["code"] == "idempotency_key_in_use", repeat.text
    monkeypatch.undo()
    if forgotten:  # a retry runs again
        scripted.enqueue_text("again")
        again = await post(http, url, body, "short-key")
        assert again.status_code == 200 and again.json()["turn_id"] != turn["turn_id"]
        assert REPLAYED not in again.headers and len(scripted.requests) == 2
    else:  # still held by the first call's run
        again = await post(http, url, body, "short-key")
        assert (again.content, again.headers[REPLAYED]) == (first.content, "true") and len(scripted.requests) == 1


async def test_a_repeat_after_its_session_was_deleted_runs_again_and_gets_its_own_answer(
    http: httpx.AsyncClient, scripted: AskedModel
) -> None:
    agent_id = await new_agent(http)
    session_id = await new_session(http, agent_id)
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    body = {"messages": user("hi"), "stream": False}
    scripted.enqueue_text("done")
    assert (await post(http, url, body, "deleted-key")).status_code == 200
    assert (await http.delete(f"/v1/agents/{agent_id}/session/{session_id}")).status_code == 200
    repeat = await post(http, url, body, "deleted-key")  # its turn went with the session: the key goes back
    assert repeat.status_code == 409 and repeat.json()["error"]["code"] == "idempotency_key_in_use", repeat.text
    retried = await post(http, url, body, "deleted-key")
    assert retried.status_code == 404 and REPLAYED not in retried.headers, retried.text
    again = await post(http, url, body, "deleted-key")
    assert (again.status_code, again.content, again.headers[REPLAYED]) == (404, retried.content, "true")
    assert len(scripted.requests) == 1
