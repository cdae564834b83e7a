"""How many times a create-response request (no conversation, no earlier response) reaches the database before
its model call: its session, its turn's start, and the response stored with its input items in one write.

Counted as in ``test_turn_round_trips.py`` (a unit of work on SQL, a command or pipeline on Redis, sent by the
request itself), on the second response of an app.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio.connection import AbstractConnection
from storage_backends import BACKENDS, unopened_store
from test_turn_round_trips import NotingModel, Trips, count_sql

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.principal import PrincipalKind
from ferryman.server.app import build_services
from ferryman.services.owned_store import beneath
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.kernel.model import Owner
from inprocess import serving

pytestmark = pytest.mark.anyio

BEFORE_INFERENCE = {False: 3, True: 4}
"""Keys off: the session, the turn's start, the response with its items. Keys on: the key first (each record's
owner is stored in the write that stores the record)."""


@pytest.mark.parametrize("keys_on", [False, True], ids=["keys-off", "keys-on"])
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_response_reaches_storage_three_times_before_its_model_call(
    backend: str, keys_on: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = Trips()
    if backend == "redis":
        monkeypatch.setattr(
            AbstractConnection, "send_packed_command", trips.counting(AbstractConnection.send_packed_command)
        )
    async with unopened_store(backend, tmp_path) as store:
        keys = ApiKeys(store.kernel)
        authenticator = BearerAuthenticator(ApiKeyAuthenticator(keys), None) if keys_on else None
        services = build_services(store, [NotingModel(trips)], authenticator=authenticator)
        async with serving(services) as http:
            headers = {}
            if keys_on:
                key = new_key()
                await keys.create(key_record("alice", key, {}))
                headers = {"Authorization": f"Bearer {key}"}
            if backend != "redis":
                count_sql(store, trips)
            body = {"model": "scripted-model", "input": "hi"}
            assert (await http.post("/v1/responses", json=body, headers=headers)).status_code == 200
            trips.watch()
            answer = await http.post("/v1/responses", json=body, headers=headers)
            assert answer.status_code == 200, answer.text
            assert trips.requested_at_inference[-1] == BEFORE_INFERENCE[keys_on]
            response_id = answer.json()["id"]
            items = await http.get(f"/v1/responses/{response_id}/input_items", headers=headers)
            stored = await beneath(services.store).get_response(response_id)
            owners = [
                await beneath(services.store).owners_of("session", [stored.session_id]),
                await beneath(services.store).owners_of("response", [response_id]),
            ]
    assert [item["content"][0]["text"] for item in items.json()["data"]] == ["hi"]
    alice = Owner(PrincipalKind.API_KEY.value, "alice")
    assert owners == ([{stored.session_id: alice}, {response_id: alice}] if keys_on else [{}, {}])
