"""A create reaches storage as often with an ``Idempotency-Key`` as without one.

``ferryman.client`` sends a key with every create. The write that stores the record claims the key and stores
its outcome (the record's kind and id, or the answer itself when it is known before the write) in the same
transaction or script, where a key used to cost a claim before the create and a completion after it: two more
trips, and a window in which a crash left a record whose key a retry, once the claim's lease ran out, would not
find. Counted as in ``test_turn_round_trips.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import BACKENDS
from test_turn_round_trips import Trips, counted_app

pytestmark = pytest.mark.anyio

AGENT = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
Create = Callable[[httpx.AsyncClient, dict[str, str], str, Trips], Awaitable[httpx.Response]]
"""Makes one record (named after ``name`` where its id is the caller's), counting its own request's trips."""


def _unkeyed(headers: dict[str, str]) -> dict[str, str]:
    """The headers of a request made for a create, not counted: without the create's key."""
    return {header: value for header, value in headers.items() if header != "Idempotency-Key"}


async def _agent_made(http: httpx.AsyncClient, headers: dict[str, str]) -> str:
    """An agent made for a create (a session's, a schedule's), not counted."""
    return str((await http.post("/v1/agents", json=AGENT, headers=_unkeyed(headers))).json()["agent_id"])


async def _agent(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    trips.watch()
    return await http.post("/v1/agents", json=AGENT, headers=headers)


async def _session(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    agent_id = await _agent_made(http, headers)
    trips.watch()
    return await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=headers)


async def _file(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    form: dict[str, Any] = {"file": (f"{name}.txt", b"some text", "text/plain")}
    trips.watch()
    return await http.post("/v1/files", files=form, data={"purpose": "assistants"}, headers=headers)


async def _model(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    body = {"model_id": f"alias-{name}", "provider_id": "scripted", "provider_model_id": "scripted-model"}
    trips.watch()
    return await http.post("/v1/models", json=body, headers=headers)


async def _toolgroup(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    trips.watch()
    return await http.post("/v1/toolgroups", json={"toolgroup_id": f"group-{name}", "provider_id": "builtin::math"},
                           headers=headers)  # fmt: skip


async def _shield(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    trips.watch()
    return await http.post("/v1/shields", json={"shield_id": f"shield-{name}", "provider_id": "ferryman-local"},
                           headers=headers)  # fmt: skip


async def _conversation(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    trips.watch()
    return await http.post("/v1/conversations", json={"metadata": {"name": name}}, headers=headers)


async def _schedule(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    agent_id = await _agent_made(http, headers)
    trips.watch()
    body = {"agent_id": agent_id, "cron": "0 0 1 1 *", "message": name}
    return await http.post("/v1/schedules", json=body, headers=headers)


async def _vector_store(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    trips.watch()
    return await http.post("/v1/vector_stores", json={"name": name}, headers=headers)


async def _vector_db(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    trips.watch()
    body = {"vector_db_id": f"db-{name}", "embedding_model": "all-MiniLM-L6-v2"}
    return await http.post("/v1/vector-dbs", json=body, headers=headers)


async def _items(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    conversation_id = (await http.post("/v1/conversations", json={}, headers=_unkeyed(headers))).json()["id"]
    trips.watch()
    items = [{"type": "message", "role": "user", "content": name}]
    return await http.post(f"/v1/conversations/{conversation_id}/items", json={"items": items}, headers=headers)


async def _store_and_file(http: httpx.AsyncClient, headers: dict[str, str], name: str) -> tuple[str, str]:
    """A vector store and an uploaded file, made uncounted."""
    unkeyed = _unkeyed(headers)
    store_id = (await http.post("/v1/vector_stores", json={"name": name}, headers=unkeyed)).json()["id"]
    form: dict[str, Any] = {"file": (f"{name}.txt", b"some text", "text/plain")}
    uploaded = await http.post("/v1/files", files=form, data={"purpose": "assistants"}, headers=unkeyed)
    return store_id, uploaded.json()["id"]


async def _attachment(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    store_id, file_id = await _store_and_file(http, headers, name)
    trips.watch()
    return await http.post(f"/v1/vector_stores/{store_id}/files", json={"file_id": file_id}, headers=headers)


async def _batch(http: httpx.AsyncClient, headers: dict[str, str], name: str, trips: Trips) -> httpx.Response:
    store_id, file_id = await _store_and_file(http, headers, name)
    trips.watch()
    return await http.post(f"/v1/vector_stores/{store_id}/file_batches", json={"file_ids": [file_id]}, headers=headers)


CREATES: dict[str, tuple[Create, int, int]] = {
    "agent": (_agent, 1, 1),
    "session": (_session, 3, 3),
    "file": (_file, 1, 1),
    "model": (_model, 1, 2),
    "toolgroup": (_toolgroup, 2, 2),
    "shield": (_shield, 2, 2),
    "conversation": (_conversation, 1, 1),
    "items": (_items, 2, 2),
    "schedule": (_schedule, 3, 3),
    "vector store": (_vector_store, 1, 1),
    "vector DB": (_vector_db, 1, 1),
    "attachment": (_attachment, 3, 3),
    "file batch": (_batch, 3, 3),
}
"""Each create, and its trips with API keys off and on (the key's lookup apart): its write; a session's agent
read before it and again after it (a delete of the agent racing the create must not leave the session behind,
and the agent created for it is not counted); a registration's read of one holding its id (a model's only
with an owner to keep: without one it is replaced as it stands); a schedule's agent read and its caller's count
of schedules before its write (the agent made for it is not counted); items' read of their conversation (made
for them, not counted); an attachment's or a batch's read of its store and of its file before its write (both
made for it, not counted). A conversation opens its session in its own write."""


@pytest.mark.parametrize("keys_on", [False, True], ids=["keys-off", "keys-on"])
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_keyed_create_costs_no_trip_more_than_an_unkeyed_one(
    backend: str, keys_on: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = Trips()
    async with counted_app(backend, keys_on, trips, tmp_path, monkeypatch) as (http, _, headers):
        # Each path once first: a Redis server loads a script the first time it is run (two more sends).
        for kind, (create, _, _) in CREATES.items():
            assert (await create(http, headers, "warm", trips)).status_code == 200
            keyed_as = {**headers, "Idempotency-Key": f"warm-{kind}"}
            assert (await create(http, keyed_as, "warm-keyed", trips)).status_code == 200
        counted: dict[tuple[str, bool], int] = {}
        for kind, (create, _, _) in CREATES.items():
            for keyed in (False, True):
                sent = {**headers, "Idempotency-Key": kind} if keyed else headers
                made = await create(http, sent, "keyed" if keyed else "plain", trips)
                assert made.status_code == 200, made.text
                counted[kind, keyed] = trips.requested - keys_on  # the API key's lookup apart
    expected = {(kind, keyed): CREATES[kind][2 if keys_on else 1] for kind in CREATES for keyed in (False, True)}
    assert counted == expected
