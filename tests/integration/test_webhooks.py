"""Webhooks in one process, on each backend: a run's end posted, signed, retried, and its delivery listed.

The receiver is a real HTTP server on loopback (``webhook_receiver``), allowed by
``fetch.allowed_hosts``; signatures are verified with the ``standardwebhooks``
package, and fail once the body is changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from standardwebhooks import WebhookVerificationError
from storage_backends import unopened_store

from ferryman.api.agents import ResumeTurnRequest, ToolResponse
from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.safe_fetch import FetchPolicy
from ferryman.server.app import Services, build_services
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.testing import ScriptedModel
from ferryman.webhook_settings import WebhookSettings
from ferryman.webhooks.signing import new_secret
from inprocess import serving
from support import WEATHER_TOOL
from webhook_receiver import Posted, Receiver, receiving

pytestmark = pytest.mark.anyio

SECRET = new_secret()
MODEL = "scripted-model"
WAIT_SECONDS = 30.0


@dataclass
class App:
    http: httpx.AsyncClient
    services: Services
    model: ScriptedModel


def webhook_settings(**changes: Any) -> WebhookSettings:
    """Settings whose retries come quickly (tests wait on events, but a backoff is still a wait)."""
    return WebhookSettings(secret=SecretStr(SECRET), backoff_seconds=0.05, max_attempts=3, **changes)


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[App]:
    async with unopened_store(request.param, tmp_path) as store:
        model = ScriptedModel()
        services = build_services(
            store, [model], fetch=FetchPolicy(allowed_hosts=["127.0.0.1"]), webhooks=webhook_settings()
        )
        async with serving(services) as http:
            yield App(http, services, model)


@asynccontextmanager
async def keyed_app(
    backend: str, tmp_path: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, Services, ScriptedModel, dict[str, dict[str, str]]]]:
    """An app with API keys on over a fresh ``backend`` store: its client, services, model, and the headers of
    alice's and bob's requests."""
    async with unopened_store(backend, tmp_path) as store:
        keys = ApiKeys(store.kernel)
        model = ScriptedModel()
        services = build_services(
            store,
            [model],
            fetch=FetchPolicy(allowed_hosts=["127.0.0.1"]),
            webhooks=webhook_settings(),
            authenticator=BearerAuthenticator(ApiKeyAuthenticator(keys), None),
        )
        async with serving(services) as http:
            bearer = {}
            for name in ("alice", "bob"):
                key = new_key()
                await keys.create(key_record(name, key, {}))
                bearer[name] = {"Authorization": f"Bearer {key}"}
            yield http, services, model, bearer


async def settled(services: Services, delivery_id: str, status: str) -> dict[str, Any]:
    """The delivery once it has ``status`` (woken by each attempt the worker records, no polling)."""
    recorded = services.webhooks.worker.recorded
    async with asyncio.timeout(WAIT_SECONDS):
        while True:
            recorded.clear()
            found = await services.webhooks.get(None, delivery_id)
            if found.status == status:
                return found.model_dump(mode="json")
            await recorded.wait()


async def received(receiver: Receiver, count: int) -> list[Posted]:
    return await asyncio.to_thread(receiver.wait_for, count)


async def agent_session(app: App, **config: Any) -> tuple[str, str]:
    body = {"agent_config": {"model": MODEL, "instructions": "Be brief.", **config}}
    agent = await app.http.post("/v1/agents", json=body)
    assert agent.status_code == 200, agent.text
    agent_id = agent.json()["agent_id"]
    session = await app.http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "hooks"})
    return agent_id, session.json()["session_id"]


def turn_body(text: str, webhook: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "stream": False, "webhook": webhook}


def assert_signed(posted: Posted) -> dict[str, Any]:
    """The event, its signature verified; the same request with a changed body fails verification."""
    event = posted.verified(SECRET)
    tampered = Posted(posted.path, posted.headers, posted.body.replace(b'"data"', b'"data" ', 1))
    with pytest.raises(WebhookVerificationError):
        tampered.verified(SECRET)
    forged = Posted(posted.path, {**posted.headers, "webhook-id": "msg_other"}, posted.body)
    with pytest.raises(WebhookVerificationError):
        forged.verified(SECRET)
    return event


async def test_a_turn_posts_its_signed_end_and_the_delivery_is_listed(app: App) -> None:
    agent_id, session_id = await agent_session(app)
    app.model.enqueue_text("Paris.")
    with receiving() as receiver:
        turn = await app.http.post(
            f"/v1/agents/{agent_id}/session/{session_id}/turn", json=turn_body("Capital of France?", receiver.url)
        )
        assert turn.status_code == 200, turn.text
        (posted,) = await received(receiver, 1)
    assert posted.path == "/hooks?token=secret-token"
    event = assert_signed(posted)
    assert event["type"] == "turn.completed"
    assert (
        event["data"]
        == (await app.http.get(f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn.json()['turn_id']}")).json()
    )
    delivery = await settled(app.services, posted.headers["webhook-id"], "delivered")
    assert delivery["run_id"] == turn.json()["turn_id"]
    assert delivery["url"] == receiver.url.split("/hooks")[0] + "/…"  # the path may be the secret: hidden
    assert "secret-token" not in str(delivery)
    assert [a["status_code"] for a in delivery["attempts"]] == [200]
    listed = (await app.http.get("/v1/webhook_deliveries")).json()
    assert [d["id"] for d in listed["data"]] == [delivery["id"]] and listed["has_more"] is False
    assert (await app.http.get(f"/v1/webhook_deliveries/{delivery['id']}")).json() == delivery
    by_run = await app.http.get("/v1/webhook_deliveries", params={"run_id": "another"})
    assert by_run.json()["data"] == []
    assert (await app.http.get("/v1/webhook_deliveries/msg_none")).status_code == 404


async def test_a_receiver_failing_twice_gets_the_same_event_a_third_time(app: App) -> None:
    agent_id, session_id = await agent_session(app)
    app.model.enqueue_text("Hi.")
    with receiving((500, 503)) as receiver:
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
        assert (await app.http.post(url, json=turn_body("Hello", receiver.url))).status_code == 200
        posts = await received(receiver, 3)
        delivery = await settled(app.services, posts[0].headers["webhook-id"], "delivered")
    assert len({p.headers["webhook-id"] for p in posts}) == 1
    assert len({p.body for p in posts}) == 1
    assert all(assert_signed(p)["type"] == "turn.completed" for p in posts)
    assert [a["status_code"] for a in delivery["attempts"]] == [500, 503, 200]
    assert [a.get("error") is None for a in delivery["attempts"]] == [False, False, True]
    assert "next_attempt_at" not in delivery or delivery["next_attempt_at"] is None


async def test_a_redirect_is_not_followed_but_fails_the_attempt(app: App) -> None:
    agent_id, session_id = await agent_session(app)
    app.model.enqueue_text("Hi.")
    with receiving((307,)) as receiver:
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
        assert (await app.http.post(url, json=turn_body("Hello", receiver.url))).status_code == 200
        posts = await received(receiver, 2)
        delivery = await settled(app.services, posts[0].headers["webhook-id"], "delivered")
    assert [a["status_code"] for a in delivery["attempts"]] == [307, 200]
    assert [p.path for p in posts] == ["/hooks?token=secret-token"] * 2  # never to /redirected
    assert delivery["attempts"][0]["error"] == "the receiver answered HTTP 307"


async def test_a_delivery_is_given_up_after_its_attempts(app: App) -> None:
    agent_id, session_id = await agent_session(app)
    app.model.enqueue_text("Hi.")
    with receiving((500, 500, 500, 500)) as receiver:
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
        assert (await app.http.post(url, json=turn_body("Hello", receiver.url))).status_code == 200
        posts = await received(receiver, 3)
        delivery = await settled(app.services, posts[0].headers["webhook-id"], "failed")
    assert len(delivery["attempts"]) == 3 == len(receiver.posted)
    assert delivery["attempts"][-1]["error"] == "the receiver answered HTTP 500"


async def test_a_paused_turn_and_its_resume_each_post_their_end(app: App) -> None:
    agent_id, session_id = await agent_session(app, client_tools=[WEATHER_TOOL])
    app.model.enqueue_tool_call("get_weather", {"city": "Paris"})
    app.model.enqueue_text("Sunny.")
    with receiving() as receiver:
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
        paused = (await app.http.post(url, json=turn_body("Weather?", receiver.url))).json()
        assert paused["status"] == "awaiting_input"
        (first,) = await received(receiver, 1)
        call = paused["output_message"]["tool_calls"][0]
        answer = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "sunny"}
        body = {"tool_responses": [answer], "stream": False, "webhook": receiver.url}
        resumed = await app.http.post(f"{url}/{paused['turn_id']}/resume", json=body)
        assert resumed.json()["status"] == "completed", resumed.text
        second = (await received(receiver, 2))[1]
    assert [assert_signed(p)["type"] for p in (first, second)] == ["turn.awaiting_input", "turn.completed"]
    assert first.headers["webhook-id"] != second.headers["webhook-id"]
    runs = (await app.http.get("/v1/webhook_deliveries", params={"run_id": paused["turn_id"], "order": "asc"})).json()
    assert [d["type"] for d in runs["data"]] == ["turn.awaiting_input", "turn.completed"]


async def test_a_response_posts_its_end_and_a_cancelled_one_too(app: App) -> None:
    app.model.enqueue_text("Hello there.")
    app.model.enqueue_text("Never seen.", gate="held")
    with receiving() as receiver:
        done = await app.http.post("/v1/responses", json={"model": MODEL, "input": "Hi", "webhook": receiver.url})
        assert done.status_code == 200, done.text
        (posted,) = await received(receiver, 1)
        body = {"model": MODEL, "input": "Wait", "background": True, "webhook": receiver.url}
        waiting = (await app.http.post("/v1/responses", json=body)).json()
        await app.model.script.wait_for_requests(2)
        cancelled = await app.http.post(f"/v1/responses/{waiting['id']}/cancel")
        assert cancelled.json()["status"] == "cancelled", cancelled.text
        second = (await received(receiver, 2))[1]
        app.model.script.open_gate("held")
    first_event, second_event = assert_signed(posted), assert_signed(second)
    assert first_event["type"] == "response.completed"
    assert first_event["data"] == (await app.http.get(f"/v1/responses/{done.json()['id']}")).json()
    assert second_event["type"] == "response.cancelled" and second_event["data"]["id"] == waiting["id"]


@pytest.mark.parametrize(
    ("webhook", "problem"),
    [
        ("http://10.1.2.3/hook", "fetch.allowed_hosts"),
        ("http://[::1]/hook", "fetch.allowed_hosts"),
        ("http://[::ffff:10.1.2.3]/hook", "fetch.allowed_hosts"),
        ("http://169.254.169.254/latest/meta-data", "fetch.allowed_hosts"),
        ("ftp://example.com/hook", "http(s) URL"),
        ("http://", "with a host"),
    ],
)
async def test_a_webhook_that_cannot_be_delivered_to_is_refused(app: App, webhook: str, problem: str) -> None:
    agent_id, session_id = await agent_session(app)
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    answer = {"call_id": "c1", "tool_name": "get_weather", "content": "sunny"}
    for path, body in (
        (url, turn_body("Hi", webhook)),
        ("/v1/responses", {"model": MODEL, "input": "Hi", "webhook": webhook}),
        (f"{url}/some-turn/resume", {"tool_responses": [answer], "webhook": webhook}),
    ):
        refused = await app.http.post(path, json=body)
        assert refused.status_code == 400, refused.text
        assert problem in refused.json()["error"]["message"], refused.text
        assert refused.json()["error"]["field"] == "webhook"
    assert (await app.http.get("/v1/webhook_deliveries")).json()["data"] == []


async def test_a_caller_reads_only_its_own_deliveries(tmp_path: Path) -> None:
    async with keyed_app("sqlite", tmp_path) as (http, services, model, bearer):
        model.enqueue_text("Hi.")
        model.enqueue_tool_call("get_weather", {"city": "Paris"})
        model.enqueue_text("Sunny.")
        with receiving() as receiver:
            body = {"model": MODEL, "input": "Hi", "webhook": receiver.url}
            made = await http.post("/v1/responses", json=body, headers=bearer["alice"])
            assert made.status_code == 200, made.text
            (posted,) = await received(receiver, 1)
            await settled(services, posted.headers["webhook-id"], "delivered")
            # A run the server continues itself (the approval inbox: no caller, or an approver) is still
            # alice's: its delivery is hers to read.
            agent = {"agent_config": {"model": MODEL, "instructions": "Brief.", "client_tools": [WEATHER_TOOL]}}
            agent_id = (await http.post("/v1/agents", json=agent, headers=bearer["alice"])).json()["agent_id"]
            session = {"session_name": "s"}
            made = await http.post(f"/v1/agents/{agent_id}/session", json=session, headers=bearer["alice"])
            session_id = made.json()["session_id"]
            url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
            paused = await http.post(url, json=turn_body("Weather?", receiver.url), headers=bearer["alice"])
            call = paused.json()["output_message"]["tool_calls"][0]
            answer = ToolResponse(call_id=call["call_id"], tool_name="get_weather", content="sunny")
            request = ResumeTurnRequest(tool_responses=[answer], stream=False, webhook=receiver.url)
            live = await services.agents.resume_turn(
                agent_id, session_id, paused.json()["turn_id"], request, continued=True
            )
            await live.settled.wait()
            continued = (await received(receiver, 3))[2]
            await settled(services, continued.headers["webhook-id"], "delivered")
        listed = (await http.get("/v1/webhook_deliveries", headers=bearer["alice"])).json()["data"]
        assert continued.headers["webhook-id"] in [d["id"] for d in listed]
        delivery_id = posted.headers["webhook-id"]
        own = (await http.get("/v1/webhook_deliveries", headers=bearer["alice"])).json()
        assert [d["id"] for d in own["data"]][-1] == delivery_id
        assert (await http.get("/v1/webhook_deliveries", headers=bearer["bob"])).json()["data"] == []
        hidden = await http.get(f"/v1/webhook_deliveries/{delivery_id}", headers=bearer["bob"])
        assert hidden.status_code == 404
        assert (await http.get(f"/v1/webhook_deliveries/{delivery_id}", headers=bearer["alice"])).status_code == 200


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
async def test_a_run_end_lost_after_its_outcome_was_stored_is_posted_by_the_recheck(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with unopened_store(backend, tmp_path) as store:
        model = ScriptedModel()
        settings = webhook_settings(recheck_seconds=0.2, poll_seconds=0.05)
        services = build_services(store, [model], fetch=FetchPolicy(allowed_hosts=["127.0.0.1"]), webhooks=settings)
        queue = services.webhooks.notify
        lost: list[str] = []

        async def dying(url: str, run_key: str, run_id: str, *rest: Any) -> None:
            if run_key not in lost:  # the process dies after the run's outcome is stored, before its event is
                lost.append(run_key)
                return
            await queue(url, run_key, run_id, *rest)

        monkeypatch.setattr(services.webhooks, "notify", dying)
        async with serving(services) as http:
            app = App(http, services, model)
            agent_id, session_id = await agent_session(app)
            model.enqueue_text("Paris.")
            model.enqueue_text("Hello.")
            with receiving() as receiver:
                turn = await http.post(
                    f"/v1/agents/{agent_id}/session/{session_id}/turn", json=turn_body("Capital?", receiver.url)
                )
                assert turn.status_code == 200, turn.text
                response = await http.post(
                    "/v1/responses", json={"model": MODEL, "input": "Hi", "webhook": receiver.url}
                )
                assert response.status_code == 200, response.text
                posts = await received(receiver, 2)
            events = sorted((assert_signed(p) for p in posts), key=lambda e: str(e["type"]))
            assert [e["type"] for e in events] == ["response.completed", "turn.completed"]
            assert events[0]["data"]["id"] == response.json()["id"]
            assert events[1]["data"]["turn_id"] == turn.json()["turn_id"]
            assert len(lost) == 2 and len(receiver.posted) == 2
            assert await services.webhooks.outbox.armed.all() == []


async def test_a_settled_delivery_keeps_no_content_and_goes_with_its_run(app: App) -> None:
    agent_id, session_id = await agent_session(app)
    app.model.enqueue_text("Kept a moment.")
    app.model.enqueue_text("Not stored.")
    with receiving() as receiver:
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
        assert (await app.http.post(url, json=turn_body("Hi", receiver.url))).status_code == 200
        body = {"model": MODEL, "input": "Hi", "store": False, "webhook": receiver.url}
        assert (await app.http.post("/v1/responses", json=body)).status_code == 200
        posts = await received(receiver, 2)
        ids = [p.headers["webhook-id"] for p in posts]
        for delivery_id in ids:
            await settled(app.services, delivery_id, "delivered")
    outbox = app.services.webhooks.outbox
    for delivery_id in ids:
        stored = await outbox.find(delivery_id)
        assert stored is not None and stored.value.payload == "" and stored.value.target == ""
    assert len((await app.http.get("/v1/webhook_deliveries")).json()["data"]) == 2

    app.model.enqueue_text("Stored.")
    with receiving() as receiver:
        body = {"model": MODEL, "input": "Hi", "webhook": receiver.url}
        response_id = (await app.http.post("/v1/responses", json=body)).json()["id"]
        (posted,) = await received(receiver, 1)
        await settled(app.services, posted.headers["webhook-id"], "delivered")
    assert (await app.http.delete(f"/v1/responses/{response_id}")).status_code == 200
    assert (await app.http.delete(f"/v1/agents/{agent_id}/session/{session_id}")).status_code == 200
    left = (await app.http.get("/v1/webhook_deliveries")).json()["data"]
    assert [d["type"] for d in left] == ["response.completed"]  # the store: false response's, never deleted
    assert (await app.http.get(f"/v1/webhook_deliveries/{posted.headers['webhook-id']}")).status_code == 404


async def test_a_turn_removed_before_its_end_was_queued_posts_that_it_was_deleted(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id, session_id = await agent_session(app)
    app.model.enqueue_text("Said, then removed.")
    store = app.services.agents._store  # what a run stores its events through
    save = store.save_turn_events

    async def removed_first(turn_id: str, first_seq: int, events: list[str]) -> None:
        # Another replica's rollback (or a deletion) that did not wait for this run's end removes the turn here.
        await store.delete_session(agent_id, session_id)
        await save(turn_id, first_seq, events)

    monkeypatch.setattr(store, "save_turn_events", removed_first)
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    with receiving() as receiver:
        await app.http.post(url, json=turn_body("First", receiver.url))
        (posted,) = await received(receiver, 1)
    gone = assert_signed(posted)
    assert gone["type"] == "turn.failed"
    assert gone["data"] == {"turn_id": gone["data"]["turn_id"], "session_id": session_id, "status": "deleted"}


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_a_deleted_turns_delivery_is_still_its_owners(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's owner goes with the turn: the delivery telling its deletion keeps the owner read as it ran."""
    async with keyed_app(backend, tmp_path) as (http, services, model, bearer):
        agent = {"agent_config": {"model": MODEL, "instructions": "Brief."}}
        agent_id = (await http.post("/v1/agents", json=agent, headers=bearer["alice"])).json()["agent_id"]
        made = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=bearer["alice"])
        session_id = made.json()["session_id"]
        store = services.agents._store
        save = store.save_turn_events

        async def removed_first(turn_id: str, first_seq: int, events: list[str]) -> None:
            await store.delete_session(agent_id, session_id)  # its owner goes with it
            assert await store.turn_owners([turn_id]) == {}
            services.agents._host.guard._kept.clear()  # the end reads no kept owner
            await save(turn_id, first_seq, events)

        monkeypatch.setattr(store, "save_turn_events", removed_first)
        model.enqueue_text("Said, then removed.")
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
        with receiving() as receiver:
            await http.post(url, json=turn_body("First", receiver.url), headers=bearer["alice"])
            (posted,) = await received(receiver, 1)
            await settled(services, posted.headers["webhook-id"], "delivered")
        assert assert_signed(posted)["data"]["status"] == "deleted"
        delivery_id = posted.headers["webhook-id"]
        own = await http.get(f"/v1/webhook_deliveries/{delivery_id}", headers=bearer["alice"])
        assert own.status_code == 200, own.text
        hidden = await http.get(f"/v1/webhook_deliveries/{delivery_id}", headers=bearer["bob"])
        assert hidden.status_code == 404


async def test_a_turns_webhook_reads_its_owner_once_as_the_run_starts(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Auth off, the turn has no owner: read once as its run starts (before its model call), not again at its end."""
    agent_id, session_id = await agent_session(app)
    store = app.services.agents._store
    reads: list[list[str]] = []
    turn_owners = store.turn_owners

    async def counted(turn_ids: list[str]) -> dict[str, Any]:
        reads.append(list(turn_ids))
        return await turn_owners(turn_ids)

    monkeypatch.setattr(store, "turn_owners", counted)
    app.model.enqueue_text("Hi.")
    with receiving() as receiver:
        made = await app.http.post(
            f"/v1/agents/{agent_id}/session/{session_id}/turn", json=turn_body("Hi", receiver.url)
        )
        (posted,) = await received(receiver, 1)
    assert assert_signed(posted)["type"] == "turn.completed"
    assert reads == [[made.json()["turn_id"]]]
