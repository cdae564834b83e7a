"""An agent's or a session's create reaches storage as often with an ``Idempotency-Key`` as without one.

``ferryman.client`` sends a key with every create. The write that stores the record claims the key and stores
its outcome (the record's kind and id) in the same transaction or script, where a key used to cost a claim
before the create and a completion after it: two more trips, and a window in which a crash left a record whose
key a retry, once the claim's lease ran out, would not find. Counted as in ``test_turn_round_trips.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_backends import BACKENDS
from test_turn_round_trips import Trips, counted_app

pytestmark = pytest.mark.anyio

AGENT = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
CREATES = {"agent": 1, "session": 3}
"""Trips of each create: the agent's write; the session's agent read, its write, and the agent read again (a
delete of the agent racing the create must not leave the session behind)."""


@pytest.mark.parametrize("keys_on", [False, True], ids=["keys-off", "keys-on"])
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_keyed_create_costs_no_trip_more_than_an_unkeyed_one(
    backend: str, keys_on: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = Trips()
    async with counted_app(backend, keys_on, trips, tmp_path, monkeypatch) as (http, _, headers):
        # Each path once first: a Redis server loads a script the first time it is run (two more sends).
        for warm in (False, True):
            keyed_as = {**headers, "Idempotency-Key": "warm-agent"} if warm else headers
            warmed = await http.post("/v1/agents", json=AGENT, headers=keyed_as)
            url = f"/v1/agents/{warmed.json()['agent_id']}/session"
            keyed_as = {**headers, "Idempotency-Key": "warm-session"} if warm else headers
            assert (await http.post(url, json={"session_name": "s"}, headers=keyed_as)).status_code == 200
        counted: dict[tuple[str, bool], int] = {}
        for keyed in (False, True):
            sent = {**headers, "Idempotency-Key": "agent"} if keyed else headers
            trips.watch()
            made = await http.post("/v1/agents", json=AGENT, headers=sent)
            assert made.status_code == 200, made.text
            counted["agent", keyed] = trips.requested - keys_on  # the API key's lookup apart
            sent = {**headers, "Idempotency-Key": "session"} if keyed else headers
            trips.watch()
            opened = await http.post(
                f"/v1/agents/{made.json()['agent_id']}/session", json={"session_name": "s"}, headers=sent
            )
            assert opened.status_code == 200, opened.text
            counted["session", keyed] = trips.requested - keys_on
    assert counted == {(kind, keyed): CREATES[kind] for kind in CREATES for keyed in (False, True)}
