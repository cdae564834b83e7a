"""A replica keeps each session's history and reads only the turns added since; what another replica changed
otherwise (a turn deleted, an older turn completed after a newer one) it reads again (``history_cache.py``).

Each test runs on every backend, with a second store over the same database standing for another replica.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from storage_backends import BACKENDS, twin_store
from test_storage_contract import (
    answered,
    complete,
    lease,
    new_agent,
    new_session,
    pause,
    start,
    texts,
    turn_of,
    user,
)

from ferryman.ids import new_id
from ferryman.storage.base import SessionRecord, Store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(BACKENDS))
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Store, Store]]:
    async with BACKENDS[request.param](tmp_path) as store, twin_store(store) as other:
        yield store, other


async def _history(store: Store, session: SessionRecord) -> list[str]:
    """What a new turn of the session would continue, as ``store`` reads it."""
    return texts(await store.load_history(session.session_id, new_id()))


async def _session_of_two_turns(store: Store) -> tuple[SessionRecord, list[str]]:
    session = await new_session(store, (await new_agent(store)).agent_id)
    turn_ids = []
    for n in (1, 2):
        turn = await start(store, session, f"q{n}")
        await complete(store, turn, f"a{n}")
        turn_ids.append(turn.turn_id)
    return session, turn_ids


async def test_turns_another_replica_completes_extend_the_history_kept(pair: tuple[Store, Store]) -> None:
    store, other = pair
    session, _ = await _session_of_two_turns(store)
    assert await _history(store, session) == ["user:q1", "assistant:a1", "user:q2", "assistant:a2"]
    third = await start(other, session, "q3")
    await complete(other, third, "a3")
    fourth = await store.start_turn(turn_of(session, "q4"), [user("q4")])
    assert texts(fourth) == ["user:q1", "assistant:a1", "user:q2", "assistant:a2", "user:q3", "assistant:a3", "user:q4"]


async def test_a_turn_another_replica_deleted_leaves_the_history_kept(pair: tuple[Store, Store]) -> None:
    store, other = pair
    session, (first, _) = await _session_of_two_turns(store)
    assert await _history(store, session) == ["user:q1", "assistant:a1", "user:q2", "assistant:a2"]
    await other.delete_turn(session.session_id, first)
    assert await _history(store, session) == ["user:q2", "assistant:a2"]
    third = await start(store, session, "q3")
    assert texts(await store.load_history(session.session_id, third.turn_id)) == ["user:q2", "assistant:a2", "user:q3"]


async def test_an_older_turn_another_replica_completes_late_takes_its_place(pair: tuple[Store, Store]) -> None:
    store, other = pair
    session = await new_session(store, (await new_agent(store)).agent_id)
    paused = await start(store, session, "a?")
    waiting = await pause(store, paused, "calling for a")
    newer = await start(store, session, "b?")
    await complete(store, newer, "b!")
    assert await _history(store, session) == ["user:b?", "assistant:b!"]
    resumed = await other.claim_resume(session.session_id, paused.turn_id, lease())
    await other.save_step(resumed.turn_id, answered(waiting, "sunny"), resumed.infer_iters)
    await complete(other, resumed, "a!")
    assert await _history(store, session) == [
        "user:a?",
        "assistant:calling for a",
        "tool:sunny",
        "assistant:a!",
        "user:b?",
        "assistant:b!",
    ]
