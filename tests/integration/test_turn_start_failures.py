"""A streamed turn whose key is claimed by its start's write: what a repeat gets, and what a start that fails
after its write leaves (nothing).

A call refused before its write (a quota, a queue check, a missing session) claims its key then, as a call that
claims first would have: a repeat of a running turn is replayed, and a 4xx is kept. A call that fails after its
write removes the turn and gives its key back first; a repeat that found the key meanwhile is told to retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import BACKENDS, unopened_store

from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.auth.quotas import quotas_for
from ferryman.errors import InternalError
from ferryman.inference.router import ModelRouter
from ferryman.quota_settings import QuotaSettings
from ferryman.server.app import build_services
from ferryman.services.host import TurnHost
from ferryman.storage.base import Store
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.testing import ScriptedModel, ScriptedReply
from inprocess import check_script, serving

pytestmark = pytest.mark.anyio

CONTEXT = 300
INPUT = "x" * 1080
"""About 180 tokens of the prompt's 236: fits alone, not beside :data:`BLOCK`."""
BLOCK = "The user sails the ferry at dawn. " * 9
KEY = {"Idempotency-Key": "the-turn"}


class Served:
    def __init__(self, http: httpx.AsyncClient, model: ScriptedModel, store: Store) -> None:
        self.http, self.model, self.store = http, model, store
        self.url = ""

    async def session(self, memory: str | None = None) -> str:
        config = {"model": "scripted-model", "instructions": "a"}
        agent_id = (await self.http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
        opened = await self.http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
        session_id = opened.json()["session_id"]
        if memory is not None:
            put = await self.http.put(f"/v1/agents/{agent_id}/memory/human", json={"value": memory})
            assert put.status_code == 200, put.text
        self.url = f"/v1/agents/{agent_id}/session/{session_id}"
        return agent_id

    async def turn(self, text: str, headers: dict[str, str] | None = None, **body: Any) -> httpx.Response:
        sent = {"messages": [{"role": "user", "content": text}], "stream": True, **body}
        return await self.http.post(f"{self.url}/turn", json=sent, headers=headers or {})

    async def turns(self) -> list[tuple[str, str]]:
        session = await self.http.get(self.url)
        return [(turn["turn_id"], turn["status"]) for turn in session.json()["turns"]]


@pytest.fixture
def model(request: pytest.FixtureRequest) -> AsyncIterator[ScriptedModel]:
    scripted = ScriptedModel(model_ids=("scripted-model",), context_length=CONTEXT)
    yield scripted
    check_script(request, scripted.script)


@pytest.fixture(params=list(BACKENDS))
async def served(request: pytest.FixtureRequest, tmp_path: Path, model: ScriptedModel) -> AsyncIterator[Served]:
    async with unopened_store(request.param, tmp_path) as store:
        async with serving(build_services(store, [model], sole_process=True)) as http:
            yield Served(http, model, store)


def _replayed(answer: httpx.Response) -> bool:
    return answer.headers.get("idempotent-replayed") == "true"


async def test_a_repeat_refused_a_quota_slot_by_its_own_running_turn_is_replayed(
    tmp_path: Path, model: ScriptedModel
) -> None:
    quotas = quotas_for(QuotaSettings(max_running_turns=1))
    async with unopened_store("sqlite", tmp_path) as store:
        async with serving(build_services(store, [model], sole_process=True, quotas=quotas)) as http:
            with acting_as(Principal(PrincipalKind.SUBJECT, "alice")):
                served = Served(http, model, store)
                await served.session()
                model.enqueue(ScriptedReply(text="held", gate="hold"))
                first = asyncio.create_task(served.turn("hi", KEY))
                await model.script.wait_for_requests(1)  # it runs, holding alice's one slot

                repeat = asyncio.create_task(served.turn("hi", KEY))
                model.script.open_gate("hold")
                answers = await asyncio.gather(first, repeat)

    assert [answer.status_code for answer in answers] == [200, 200], answers[1].text
    assert _replayed(answers[1]) and "held" in answers[1].text


async def test_a_streamed_turn_refused_before_its_start_keeps_the_refusal(served: Served) -> None:
    await served.session()
    served.url += "-missing"

    answers = [await served.turn("hi", KEY), await served.turn("hi", KEY)]

    assert [answer.status_code for answer in answers] == [404, 404]
    assert [_replayed(answer) for answer in answers] == [False, True]


async def test_a_queued_repeat_is_replayed_though_the_memory_has_grown_since(served: Served) -> None:
    agent_id = await served.session()
    served.model.enqueue(ScriptedReply(text="ok"))
    first = await served.turn(INPUT, KEY, multitask_strategy="enqueue")
    assert first.status_code == 200, first.text
    put = await served.http.put(f"/v1/agents/{agent_id}/memory/human", json={"value": BLOCK})
    assert put.status_code == 200, put.text

    repeat = await served.turn(INPUT, KEY, multitask_strategy="enqueue")

    assert repeat.status_code == 200 and _replayed(repeat), repeat.text


async def test_a_start_failing_after_its_write_leaves_nothing(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    await served.session(memory="The user's name is Ada.")

    async def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise InternalError("the token counter is unavailable")

    with monkeypatch.context() as patched:
        patched.setattr(ModelRouter, "prompt_size", unavailable)  # the memory's size, read once the turn is stored
        failed = await served.turn("hi", KEY)

    assert failed.status_code == 500, failed.text
    assert await served.turns() == []
    served.model.enqueue(ScriptedReply(text="Hello, Ada."))
    retried = await served.turn("hi", KEY)  # the session is free and the key was given back: it runs
    assert retried.status_code == 200 and not _replayed(retried) and "Hello, Ada." in retried.text


@pytest.mark.parametrize("served", ["redis"], indirect=True)
async def test_a_redis_start_whose_pipelined_read_fails_leaves_nothing(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    await served.session(memory="The user's name is Ada.")

    def unreadable(*args: Any) -> Any:
        raise InternalError("the blocks' reply could not be read")

    with monkeypatch.context() as patched:
        patched.setattr(RedisKernel, "read_results", unreadable)  # the start's own script went through
        failed = await served.turn("hi", KEY)

    assert failed.status_code == 500, failed.text
    assert await served.turns() == []
    served.model.enqueue(ScriptedReply(text="ok"))
    assert (await served.turn("hi", KEY)).status_code == 200


async def test_a_repeat_that_found_the_key_of_a_start_being_undone_is_told_to_retry(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    await served.session(memory=BLOCK)
    waiting = asyncio.Event()
    original = TurnHost.events

    async def events(host: TurnHost, stream: str, *args: Any) -> Any:
        waiting.set()  # the repeat found the key held and waits for the first call's launch
        return await original(host, stream, *args)

    monkeypatch.setattr(TurnHost, "events", events)
    forget = served.store.forget_idempotency_key
    repeats: list[asyncio.Task[httpx.Response]] = []

    async def forget_once_the_repeat_waits(*args: Any) -> None:
        if not repeats:  # the first call, undoing the start of a turn that does not fit
            repeats.append(asyncio.create_task(served.turn(INPUT, KEY)))
            await waiting.wait()
        await forget(*args)

    monkeypatch.setattr(served.store, "forget_idempotency_key", forget_once_the_repeat_waits)

    first = await served.turn(INPUT, KEY)
    repeat = await repeats[0]

    assert first.status_code == 400 and first.json()["error"]["code"] == "context_length_exceeded"
    assert repeat.status_code == 409 and repeat.json()["error"]["code"] == "idempotency_key_in_use", repeat.text
    again = await served.turn(INPUT, KEY)
    assert again.status_code == 400 and _replayed(again)  # the refusal, kept
    assert await served.turns() == []
