"""How many times a create-turn request reaches the database before its model call, with API keys on and off.

A round trip is one unit of work sent to the backend: a transaction on SQLite or PostgreSQL (one thread hop,
one connection's statements), one command or pipeline sent to Redis. The second turn of a session is counted:
the first reads the agent, which a replica keeps from then on. With keys off a turn starts, reading its
history and the agent's memory blocks in the same transaction (one Redis pipeline); with keys on, the key is
looked up first, and the session's owner, kept since its create, is checked without a read; the turn's owner
is stored in the start's own transaction. A turn's ``Idempotency-Key`` is claimed by the start's own write
too, streamed or not, so a keyed turn counts the same; so is a resume's, by the write that moves its turn back to
running, which also reads its history and memory blocks (the paused turn, its steps and events' count are read
once before it). After the model call, a run's own writes (its end, its events) are not checked again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio.connection import AbstractConnection
from storage_backends import BACKENDS, unopened_store

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.principal import PrincipalKind
from ferryman.inference.base import ChatChunk, ChatRequest
from ferryman.inference.local_embeddings import LocalEmbeddingProvider
from ferryman.server.app import Services, build_services
from ferryman.storage.base import Store
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.kernel.model import Owner
from ferryman.testing import Script, ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import serving
from sse import frames

pytestmark = pytest.mark.anyio

BEFORE_INFERENCE = {False: 1, True: 2}
"""Keys off: the start, with the memory blocks read in its trip. Keys on: the key too."""
RESUME_BEFORE_INFERENCE = {False: 2, True: 3}
"""Keys off: the paused turn read with its steps and event count; then the write that resumes it, answering its
history and the agent's memory blocks. Keys on: the key first."""
AFTER_INFERENCE = 3
"""Either way: the turn's end, its events, its usage."""


_OPENING: ContextVar[bool] = ContextVar("opening", default=False)
"""Set while a Redis connection opens: the commands of its handshake are not counted."""


def _opening(connect: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def opened(*args: Any, **kwargs: Any) -> Any:
        token = _OPENING.set(True)
        try:
            return await connect(*args, **kwargs)
        finally:
            _OPENING.reset(token)

    return opened


class Trips:
    """Counts the units of work a store sends its backend, and what the count was when the model was called.

    ``requested`` counts those sent by the request's own task (the client's, which the in-process transport
    runs the app in) since :meth:`watch`: the app's background loops (sweeps, leases) are left out of it. So are
    the commands a new Redis connection sends as it opens (``HELLO``, ``CLIENT SETINFO``...): the pool opens one
    when a background loop holds every idle one at that moment, which is the pool's growth, not the request's
    work (a flake seen in CI: 5 trips counted where 1 was due, the start's script and a handshake of four).
    """

    def __init__(self) -> None:
        self.sent = 0
        self.at_inference: list[int] = []
        self.requested = 0
        self.requested_at_inference: list[int] = []
        self._request: asyncio.Task[Any] | None = None

    def watch(self) -> None:
        """Count the current task's units from now on (as ``requested``)."""
        self._request, self.requested = asyncio.current_task(), 0

    def counting(self, send: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            if not _OPENING.get():
                self.sent += 1
                if self._request is not None and asyncio.current_task() is self._request:
                    self.requested += 1
            return await send(*args, **kwargs)

        return counted

    def inferring(self) -> None:
        """Note the counts as the model is called."""
        self.at_inference.append(self.sent)
        self.requested_at_inference.append(self.requested)


class NotingModel(ScriptedModel):
    """The scripted model, noting how many round trips the turn had made when it is called."""

    def __init__(self, trips: Trips, script: Script | None = None) -> None:
        super().__init__(script=script or Script(default_reply=ScriptedReply(text="ok")))
        self.trips = trips

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        self.trips.inferring()
        async for chunk in super().stream_chat(request):
            yield chunk


@asynccontextmanager
async def counted_app(
    backend: str,
    keys_on: bool,
    trips: Trips,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    script: Script | None = None,
) -> AsyncIterator[tuple[httpx.AsyncClient, Services, dict[str, str]]]:
    """A client of an app over a fresh ``backend`` store whose units of work ``trips`` counts, its services, and
    the headers of its requests (with ``keys_on``, API keys are on and they carry alice's); its model answers
    from ``script`` (default: "ok" to everything)."""
    if backend == "redis":
        monkeypatch.setattr(
            AbstractConnection, "send_packed_command", trips.counting(AbstractConnection.send_packed_command)
        )
        monkeypatch.setattr(
            AbstractConnection, "connect_check_health", _opening(AbstractConnection.connect_check_health)
        )
    async with unopened_store(backend, tmp_path) as store:
        keys = ApiKeys(store.kernel)
        authenticator = BearerAuthenticator(ApiKeyAuthenticator(keys), None) if keys_on else None
        # The local embedding model loads when first asked to embed: a vector store's create only reads its size.
        providers = [NotingModel(trips, script), LocalEmbeddingProvider()]
        services = build_services(store, providers, authenticator=authenticator)
        async with serving(services) as http:
            headers = {}
            if keys_on:
                key = new_key()
                await keys.create(key_record("alice", key, {}))
                headers = {"Authorization": f"Bearer {key}"}
            if backend != "redis":
                count_sql(store, trips)
            yield http, services, headers


def count_sql(store: Store, trips: Trips) -> None:
    driver = store._db  # type: ignore[attr-defined]  # the kernel shares it
    driver.read = trips.counting(driver.read)
    driver.write = trips.counting(driver.write)


@pytest.mark.parametrize(
    ("keyed", "streamed"),
    [(False, False), (True, True), (True, False)],
    ids=["json", "streamed-with-idempotency-key", "json-with-idempotency-key"],
)
@pytest.mark.parametrize("keys_on", [False, True], ids=["keys-off", "keys-on"])
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_turn_reaches_storage_once_before_its_model_call_and_twice_with_api_keys(
    backend: str, keys_on: bool, keyed: bool, streamed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = Trips()
    async with counted_app(backend, keys_on, trips, tmp_path, monkeypatch) as (http, services, headers):
        turn = await _first_turn(http, headers)
        first_id = await _ended(services, turn)
        trips.watch()
        if keyed:  # its key is claimed by the start's own write
            headers = {**headers, "Idempotency-Key": "second-turn"}
        if streamed:
            second_id = await _streamed(services, await http.post(turn.url, json=STREAMED, headers=headers))
        else:
            second_id = await _ended(services, await http.post(turn.url, json=BODY, headers=headers))
        assert (trips.requested_at_inference[-1], trips.sent - trips.at_inference[-1]) == (
            BEFORE_INFERENCE[keys_on],
            AFTER_INFERENCE,
        )
        owners = await services.store.turn_owners([first_id, second_id])
    assert owners == ({first_id: ALICE, second_id: ALICE} if keys_on else {})


@pytest.mark.parametrize("keys_on", [False, True], ids=["keys-off", "keys-on"])
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_the_first_turn_of_a_session_opened_here_counts_the_same(
    backend: str, keys_on: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replica that opened the session knows it is no fork: its first turn looks for no lineage."""
    trips = Trips()
    async with counted_app(backend, keys_on, trips, tmp_path, monkeypatch) as (http, services, headers):
        first = await _first_turn(http, headers)
        await _ended(services, first)
        sessions = first.url.path.rsplit("/session/", 1)[0] + "/session"
        opened = await http.post(sessions, json={"session_name": "s2"}, headers=headers)
        trips.watch()
        await _ended(
            services, await http.post(f"{sessions}/{opened.json()['session_id']}/turn", json=BODY, headers=headers)
        )
    assert trips.requested_at_inference[-1] == BEFORE_INFERENCE[keys_on]


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "streamed"])
@pytest.mark.parametrize("keys_on", [False, True], ids=["keys-off", "keys-on"])
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_resume_reaches_storage_twice_before_its_model_call_keyed_or_not(
    backend: str, keys_on: bool, streamed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = Script(default_reply=ScriptedReply(text="ok"))
    trips = Trips()
    async with counted_app(backend, keys_on, trips, tmp_path, monkeypatch, script) as (http, services, headers):
        config = {"model": "scripted-model", "instructions": "Be brief.", "client_tools": [WEATHER]}
        agent = await http.post("/v1/agents", json={"agent_config": config}, headers=headers)
        agent_id = agent.json()["agent_id"]
        before: list[int] = []
        for key in (None, None, "resume-key"):  # the first warms what a replica loads once (Redis's scripts)
            session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=headers)
            url = f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"
            script.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
            paused = await _ended(services, await http.post(url, json=BODY, headers=headers))
            resume = {"tool_responses": [{"call_id": "c1", "tool_name": "get_weather", "content": "sun"}]}
            trips.watch()
            answer = await http.post(
                f"{url}/{paused}/resume",
                json={**resume, "stream": streamed},
                headers={**headers, "Idempotency-Key": key} if key else headers,
            )
            await (_streamed if streamed else _ended)(services, answer)
            before.append(trips.requested_at_inference[-1])
    assert before[1:] == [RESUME_BEFORE_INFERENCE[keys_on]] * 2  # a key is claimed by the resume's own write


WEATHER = {"name": "get_weather", "description": "weather", "parameters": []}
BODY = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
STREAMED = {**BODY, "stream": True}
ALICE = Owner(PrincipalKind.API_KEY.value, "alice")
"""Alice, as the owner of what she starts is stored."""


async def _first_turn(http: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    """The first turn of a new session of a new agent (its answer, whose URL the next turn is posted to)."""
    config = {"model": "scripted-model", "instructions": "Be brief."}
    agent = await http.post("/v1/agents", json={"agent_config": config}, headers=headers)
    agent_id = agent.json()["agent_id"]
    session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=headers)
    url = f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"
    return await http.post(url, json=BODY, headers=headers)


async def _streamed(services: Services, answer: httpx.Response) -> str:
    """The id of the turn a streamed answer ran, once its run has stored all it stores."""
    assert answer.status_code == 200, answer.text
    turn_id: str = next(frames(answer)).json()["event"]["payload"]["turn_id"]
    return await _finished(services, turn_id)


async def _ended(services: Services, answer: httpx.Response) -> str:
    """The id of the turn answered, once its run has stored all it stores (its events and usage included)."""
    assert answer.status_code == 200, answer.text
    return await _finished(services, answer.json()["turn_id"])


async def _finished(services: Services, turn_id: str) -> str:
    task = services.runner.task(turn_id)
    if task is not None:
        await task
    await services.usage.flush()
    return turn_id
