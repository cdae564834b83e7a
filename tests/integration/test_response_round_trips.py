"""How many times a create-response request (no conversation, no earlier response) reaches the database before
its model call: once, the response stored with its new session, its turn and its input items in one write (one
transaction on SQL, one script on Redis); with API keys on, the key is looked up first. In a conversation, the
conversation's record (its owner checked) and its items are read first: three, four with keys on. A page of
responses reads storage as many times however many responses it holds.

Counted as in ``test_turn_round_trips.py`` (a unit of work on SQL, a command or pipeline on Redis, sent by the
request itself), on the second response of an app.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_backends import BACKENDS
from test_turn_round_trips import Trips, counted_app

from ferryman.auth.principal import PrincipalKind
from ferryman.server.app import Services
from ferryman.services.record_guard import owners_of
from ferryman.storage.kernel.model import Owner
from sse import frames

pytestmark = pytest.mark.anyio

BEFORE_INFERENCE = {False: 1, True: 2}
"""Keys off: the start (the session, the turn, the response with its items). Keys on: the key first (the owner of
each record is stored in the start's write)."""


@pytest.mark.parametrize("keys_on", [False, True], ids=["keys-off", "keys-on"])
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_response_reaches_storage_once_before_its_model_call_and_twice_with_api_keys(
    backend: str, keys_on: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = Trips()
    async with counted_app(backend, keys_on, trips, tmp_path, monkeypatch) as (http, services, headers):
        body = {"model": "scripted-model", "input": "hi"}
        assert (await http.post("/v1/responses", json=body, headers=headers)).status_code == 200
        trips.watch()
        answer = await http.post("/v1/responses", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        assert trips.requested_at_inference[-1] == BEFORE_INFERENCE[keys_on]
        response_id = answer.json()["id"]
        items = await http.get(f"/v1/responses/{response_id}/input_items", headers=headers)
        stored = await services.store.get_response(response_id)
        owners = [
            await owners_of(services.store, "session", [stored.session_id]),  # in the session's kernel record
            await owners_of(services.store, "response", [response_id]),
        ]
    assert [item["content"][0]["text"] for item in items.json()["data"]] == ["hi"]
    alice = Owner(PrincipalKind.API_KEY.value, "alice")
    assert owners == ([{stored.session_id: alice}, {response_id: alice}] if keys_on else [{}, {}])


@pytest.mark.parametrize("keys_on", [False, True], ids=["keys-off", "keys-on"])
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_keyed_streamed_response_claims_its_key_in_the_write_that_stores_it(
    backend: str, keys_on: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ferryman.client`` sends an ``Idempotency-Key`` with every create: a stored, streamed response's key
    costs no trip of its own, and a repeat is answered with the first call's stream."""
    trips = Trips()
    async with counted_app(backend, keys_on, trips, tmp_path, monkeypatch) as (http, services, headers):
        body = {"model": "scripted-model", "input": "hi", "stream": True}
        first = await http.post("/v1/responses", json=body, headers={**headers, "Idempotency-Key": "warm"})
        assert first.status_code == 200, first.text
        await _ended(services, next(frames(first)).json()["response"]["id"])  # its last writes are not counted
        trips.watch()
        keyed = {**headers, "Idempotency-Key": "once"}
        answer = await http.post("/v1/responses", json=body, headers=keyed)
        assert answer.status_code == 200, answer.text
        assert trips.requested_at_inference[-1] == BEFORE_INFERENCE[keys_on]
        await _ended(services, next(frames(answer)).json()["response"]["id"])
        repeat = await http.post("/v1/responses", json=body, headers=keyed)
    assert repeat.headers.get("idempotent-replayed") == "true"
    assert [frame.data for frame in frames(repeat)] == [frame.data for frame in frames(answer)]


IN_A_CONVERSATION = {False: 3, True: 4}
"""The conversation's record with its owner, its items (one unit on SQL, one transaction on Redis), the start;
with keys on, the key first."""


@pytest.mark.parametrize("keys_on", [False, True], ids=["keys-off", "keys-on"])
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_response_in_a_conversation_reads_the_conversation_and_its_items_once_each(
    backend: str, keys_on: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = Trips()
    async with counted_app(backend, keys_on, trips, tmp_path, monkeypatch) as (http, _, headers):
        conversation = (await http.post("/v1/conversations", json={}, headers=headers)).json()["id"]
        body = {"model": "scripted-model", "input": "hi", "conversation": conversation}
        assert (await http.post("/v1/responses", json=body, headers=headers)).status_code == 200
        trips.watch()
        answer = await http.post("/v1/responses", json={**body, "input": "again"}, headers=headers)
        assert answer.status_code == 200, answer.text
        assert trips.requested_at_inference[-1] == IN_A_CONVERSATION[keys_on]
        items = await http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"}, headers=headers)
    texts = [item["content"][0]["text"] for item in items.json()["data"]]
    assert texts == ["hi", "ok", "again", "ok"]


LISTING = {False: 3, True: 4}
"""The page of the responses' records (their owners filtered in the query), those responses, and their input items,
however many are on the page; with keys on, the key first."""


@pytest.mark.parametrize("keys_on", [False, True], ids=["keys-off", "keys-on"])
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_page_of_responses_reads_storage_the_same_number_of_times_however_long(
    backend: str, keys_on: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips = Trips()
    async with counted_app(backend, keys_on, trips, tmp_path, monkeypatch) as (http, _, headers):
        for n in range(4):
            messages = [{"role": "user", "content": text} for text in (f"q{n}", "again")]
            body = {"model": "scripted-model", "input": messages}
            assert (await http.post("/v1/responses", json=body, headers=headers)).status_code == 200
        counts, pages = [], []
        for limit in (1, 4):
            trips.watch()
            page = await http.get("/v1/responses", params={"limit": limit, "order": "asc"}, headers=headers)
            assert page.status_code == 200, page.text
            counts.append(trips.requested)
            pages.append(page.json()["data"])
    assert counts == [LISTING[keys_on]] * 2
    inputs = [[item["content"][0]["text"] for item in response["input"]] for response in pages[1]]
    assert inputs == [[f"q{n}", "again"] for n in range(4)]
    assert pages[0] == pages[1][:1]


async def _ended(services: Services, response_id: str) -> None:
    """Return once the response's run, its stream read to its end, has stored all it writes."""
    task = services.runner.task(response_id)
    if task is not None:
        await task
