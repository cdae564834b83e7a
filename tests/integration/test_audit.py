"""Audit records as data on every backend: what is recorded, who may read it, filters, paging and retention.

API keys: alice and carol (team red), bob, limited (one request a minute) and auditor
(a policy grant on ``audit::*``). The scenario: alice creates an agent; bob's delete of it
is a 404 by policy, carol's (she may read it) a 403; a request without a credential is a
401, limited's second request a 429; alice deletes her agent. The trail is flushed with
``AuditTrail.flush`` before each read: nothing waits on time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import unopened_store

from ferryman.api.audit import AuditRecord
from ferryman.audit_settings import AuditSettings
from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.policy import ACTIONS, parse_policy
from ferryman.auth.quotas import quotas_for
from ferryman.cli import remote
from ferryman.cli.main import main
from ferryman.client import AsyncClient, Client
from ferryman.quota_settings import QuotaSettings
from ferryman.server.app import Services, build_services
from ferryman.services.audit import SECONDS_PER_DAY
from ferryman.storage.base import Store
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.domain.audit import AuditLog, AuditQuery
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from inprocess import BASE_URL, serving

pytestmark = pytest.mark.anyio

POLICY = [
    {"permit": {"principal": "key:auditor", "actions": ["read"], "resource": "audit::*"}},
    {"permit": {"actions": ["read"], "resource": "agent::*"}, "when": "user in owners teams"},
    {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
]
KEYS = {
    "alice": {"teams": ["red"]},
    "carol": {"teams": ["red"]},
    "bob": {},
    "limited": {"roles": ["limited"]},
    "auditor": {},
}
FIELDS = ("event", "principal", "action", "resource", "outcome", "status", "route", "request_id")
AGENT = "/v1/agents/{agent_id}"


@dataclass
class Served:
    http: httpx.AsyncClient
    services: Services
    keys: dict[str, dict[str, str]]

    async def call(self, method: str, url: str, who: str | None, request_id: str, **kwargs: Any) -> httpx.Response:
        headers = {**(self.keys[who] if who else {}), "X-Request-ID": request_id}
        return await self.http.request(method, url, headers=headers, **kwargs)

    async def listed(self, who: str, **params: Any) -> dict[str, Any]:
        await self.services.audit.trail.flush()
        answer = await self.http.get("/v1/audit", params=params, headers=self.keys[who])
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        assert body["object"] == "list"
        return body

    async def rows(self, who: str, **params: Any) -> list[tuple[Any, ...]]:
        """Every record listed, page after page (a page may stop at ``audit.max_scan``: its cursor goes on)."""
        found: list[tuple[Any, ...]] = []
        while True:
            page = await self.listed(who, **params)
            found.extend(tuple(record[name] for name in FIELDS) for record in page["data"])
            if not page["has_more"]:
                return found
            params["after"] = page["last_id"]


async def _served_over(store: Store, settings: AuditSettings) -> AsyncIterator[Served]:
    """The app over ``store`` with the scenario's keys, policy and quotas, until the caller stops iterating."""
    keys = ApiKeys(store.kernel)
    quotas = QuotaSettings(roles={"limited": {"requests_per_minute": 1}})
    services = build_services(
        store,
        [ScriptedModel()],
        authenticator=BearerAuthenticator(ApiKeyAuthenticator(keys), None),
        policy=parse_policy(POLICY),
        quotas=quotas_for(quotas),
        audit=settings,
    )
    async with serving(services) as http:
        bearer = {}
        for name, attributes in KEYS.items():
            key = new_key()
            await keys.create(key_record(name, key, attributes))
            bearer[name] = {"Authorization": f"Bearer {key}"}
        yield Served(http, services, bearer)


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Served]:
    async with unopened_store(request.param, tmp_path) as store:
        async for app in _served_over(store, AuditSettings(max_scan=2, sweep_batch_size=2)):
            yield app


@dataclass
class Scenario:
    agent_id: str
    middle: float


async def _scenario(app: Served) -> Scenario:
    body = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
    created = await app.call("POST", "/v1/agents", "alice", "req-create", json=body)
    assert created.status_code == 200, created.text
    agent_id = created.json()["agent_id"]
    url = AGENT.format(agent_id=agent_id)
    assert (await app.call("DELETE", url, "bob", "req-bob")).status_code == 404
    assert (await app.call("GET", url, "carol", "req-carol-read")).status_code == 200  # allowed: no record
    await app.services.audit.trail.flush()
    middle = time.time()
    assert (await app.call("DELETE", url, "carol", "req-carol")).status_code == 403
    assert (await app.call("GET", url, None, "req-anon")).status_code == 401
    assert (await app.call("GET", "/v1/agents", "limited", "req-limited-1")).status_code == 200
    assert (await app.call("GET", "/v1/agents", "limited", "req-limited")).status_code == 429
    assert (await app.call("DELETE", url, "alice", "req-delete")).status_code == 200
    return Scenario(agent_id, middle)


def _expected(agent_id: str) -> list[tuple[Any, ...]]:
    """Every record of the scenario, newest first."""
    resource = f"agent::{agent_id}"
    return [
        ("delete", "key:alice", "delete", resource, "allowed", None, AGENT, "req-delete"),
        ("rate_limited", "key:limited", "read", "/v1/agents", "denied", 429, "/v1/agents", "req-limited"),
        ("authentication_failed", None, "read", f"/v1/agents/{agent_id}", "denied", 401, AGENT, "req-anon"),
        ("denied", "key:carol", "delete", resource, "denied", 403, AGENT, "req-carol"),
        ("denied", "key:bob", "delete", resource, "denied", 404, AGENT, "req-bob"),
        ("create", "key:alice", "create", resource, "allowed", None, "/v1/agents", "req-create"),
    ]


async def test_creates_deletes_and_every_denial_are_recorded_with_their_action_and_request_id(served: Served) -> None:
    scenario = await _scenario(served)
    expected = _expected(scenario.agent_id)
    assert await served.rows("auditor") == expected

    # Without the grant, a principal reads its own trail; nobody but the grant reads the unauthenticated 401.
    assert await served.rows("alice") == [expected[0], expected[5]]
    assert await served.rows("bob") == [expected[4]]
    assert await served.rows("carol") == [expected[3]]


async def test_filters_and_paging(served: Served) -> None:
    scenario = await _scenario(served)
    expected = _expected(scenario.agent_id)
    resource = f"agent::{scenario.agent_id}"

    # One indexed filter each (principal, resource, outcome), the unindexed action, and since.
    assert await served.rows("auditor", principal="key:alice") == [expected[0], expected[5]]
    assert await served.rows("auditor", resource=resource) == [expected[i] for i in (0, 3, 4, 5)]
    assert await served.rows("auditor", outcome="denied", limit=100) == expected[1:5]
    assert await served.rows("auditor", since=str(scenario.middle)) == expected[:4]
    # Several filters: one index, the others applied while reading.
    assert await served.rows("auditor", resource=resource, outcome="denied") == [expected[3], expected[4]]
    assert await served.rows("auditor", principal="key:alice", action="create") == [expected[5]]
    unknown = await served.http.get("/v1/audit", params={"action": "erase"}, headers=served.keys["auditor"])
    assert unknown.status_code == 400 and "action" in unknown.json()["error"]["message"]

    # Pages of two, oldest first, followed by their cursor, give every record once.
    seen: list[tuple[Any, ...]] = []
    after: str | None = None
    while True:
        page = await served.listed("auditor", limit=2, order="asc", **({"after": after} if after else {}))
        seen.extend(tuple(record[name] for name in FIELDS) for record in page["data"])
        assert len(page["data"]) <= 2 and page["first_id"] == (page["data"][0]["id"] if page["data"] else None)
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert seen == expected[::-1]

    # An unindexed filter stops after audit.max_scan (2) records: fewer than the limit, has_more, a cursor past
    # the records examined; following it finds the rest.
    first = await served.listed("auditor", action="delete")
    assert [r["request_id"] for r in first["data"]] == ["req-delete"] and first["has_more"]
    second = await served.listed("auditor", action="delete", after=first["last_id"])
    assert [r["request_id"] for r in second["data"]] == ["req-carol"] and second["has_more"]
    third = await served.listed("auditor", action="delete", after=second["last_id"])
    assert [r["request_id"] for r in third["data"]] == ["req-bob"] and not third["has_more"]

    # The SDK follows the cursor across such pages, empty ones included (no create among the newest four).
    key = served.keys["auditor"]["Authorization"].removeprefix("Bearer ")
    async with AsyncClient(base_url=BASE_URL, api_key=key, http_client=served.http, max_retries=0) as sdk:
        listed = [record async for record in await sdk.audit.list(action="create", limit=1)]
    assert [(r.request_id, r.resource) for r in listed] == [("req-create", resource)]


def _old_records(count: int, prefix: str) -> list[tuple[AuditRecord, None]]:
    old = time.time() - 91 * SECONDS_PER_DAY
    return [
        (AuditRecord(id=f"audit_{prefix}{i}", created_at=old + i, event="create", action="create",
                     resource=f"agent::{i}", outcome="allowed"), None)
        for i in range(count)
    ]  # fmt: skip


async def test_retention_deletes_old_records_in_batches(served: Served) -> None:
    async with asyncio.timeout(10):
        await served.services.audit.swept.wait()  # the sweep at start is over: the next is an hour away
    await served.services.audit.records.write(_old_records(5, "old"))
    scenario = await _scenario(served)
    assert len(await served.rows("auditor", limit=100)) == 11
    assert await served.services.audit.sweep() == 5  # three writes of at most audit.sweep_batch_size (2)
    assert await served.rows("auditor", limit=100) == _expected(scenario.agent_id)
    assert await served.services.audit.sweep() == 0


async def test_the_server_sweeps_old_records_when_it_starts(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with unopened_store("sqlite", tmp_path) as store:
        await store.open()
        try:
            await AuditLog(store.kernel).write(_old_records(3, "old"))
        finally:
            await store.close()
        reopened = SqliteStore(str(tmp_path / "unopened.db"))  # the file unopened_store made
        with caplog.at_level(logging.INFO, logger="ferryman.services.audit"):
            async for app in _served_over(reopened, AuditSettings(sweep_batch_size=2)):
                async with asyncio.timeout(10):
                    await app.services.audit.swept.wait()
                assert await app.rows("auditor") == []
    assert "deleted 3 audit records older than 90 days" in caplog.text


async def test_a_newline_in_a_path_is_stored_escaped(served: Served, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ferryman.audit"):
        refused = await served.call("GET", "/v1/agents/a%0Aforged%20line", None, "req-newline")
    assert refused.status_code == 401
    [record] = (await served.listed("auditor"))["data"]
    assert record["resource"] == "/v1/agents/a\\nforged line" and record["request_id"] == "req-newline"
    assert all("\n" not in str(value) for value in record.values())
    [line] = [r.getMessage() for r in caplog.records if r.name == "ferryman.audit"]
    assert "\n" not in line and "a\\nforged" in line


async def test_records_left_queued_are_written_when_the_app_stops(tmp_path: Path) -> None:
    settings = AuditSettings(flush_interval_seconds=3600)  # only the stop writes them
    async with unopened_store("sqlite", tmp_path) as store:
        async for app in _served_over(store, settings):
            assert (await app.call("GET", "/v1/agents", None, "req-last")).status_code == 401
            assert app.services.audit.trail.waiting == 1
        reopened = SqliteStore(str(tmp_path / "unopened.db"))  # the file unopened_store made
        await reopened.open()
        try:
            page = await AuditLog(reopened.kernel).page(AuditQuery())
        finally:
            await reopened.close()
    assert [(r.event, r.request_id) for r in page.items] == [("authentication_failed", "req-last")]


async def test_the_list_is_open_with_authentication_off(tmp_path: Path) -> None:
    async with unopened_store("sqlite", tmp_path) as store:
        services = build_services(store, [ScriptedModel()])
        async with serving(services) as http:
            record = AuditRecord(id="audit_1", created_at=time.time(), event="create", action="create",
                                 resource="agent::a", outcome="allowed", principal="key:alice")  # fmt: skip
            await services.audit.records.write([(record, None)])
            answer = await http.get("/v1/audit")
    assert answer.status_code == 200
    assert [r["id"] for r in answer.json()["data"]] == ["audit_1"]


class _Bridge(httpx.BaseTransport):
    """A blocking transport over the test's async ASGI client: the CLI runs in a thread, the app on this loop."""

    def __init__(self, http: httpx.AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        self._http, self._loop = http, loop

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def send() -> httpx.Response:
            answer = await self._http.send(request)
            return httpx.Response(answer.status_code, headers=answer.headers, content=await answer.aread())

        return asyncio.run_coroutine_threadsafe(send(), self._loop).result(timeout=30)


async def test_the_cli_lists_records_as_json_and_as_a_table(
    served: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = await _scenario(served)
    await served.services.audit.trail.flush()
    bridge = _Bridge(served.http, asyncio.get_running_loop())
    key = served.keys["auditor"]["Authorization"].removeprefix("Bearer ")

    def client_for(args: Any) -> Client:
        return Client(base_url=BASE_URL, api_key=key, http_client=httpx.Client(transport=bridge, base_url=BASE_URL))

    monkeypatch.setattr(remote, "client_for", client_for)

    async def ferryman(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        code = await asyncio.to_thread(main, list(argv))
        return code, capsys.readouterr().out

    code, out = await ferryman("audit", "list", "--json", "--principal", "key:alice", "--action", "delete")
    assert code == 0
    assert [(r["request_id"], r["resource"]) for r in json.loads(out)] == [
        ("req-delete", f"agent::{scenario.agent_id}")
    ]
    code, out = await ferryman("audit", "list", "--json", "--since", str(scenario.middle), "--limit", "2")
    assert code == 0 and [r["request_id"] for r in json.loads(out)] == ["req-delete", "req-limited"]
    code, out = await ferryman("audit", "list", "--outcome", "denied")
    assert code == 0 and "denied (403)" in out and "key:carol" in out and "req-anon" in out


async def test_deleting_an_agent_with_a_session_records_no_denial_of_its_memory_store(served: Served) -> None:
    body = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
    agent_id = (await served.call("POST", "/v1/agents", "alice", "req-agent", json=body)).json()["agent_id"]
    session = await served.call(
        "POST", f"/v1/agents/{agent_id}/session", "alice", "req-session", json={"session_name": "s"}
    )
    assert session.status_code == 200, session.text
    assert (await served.call("DELETE", AGENT.format(agent_id=agent_id), "alice", "req-delete")).status_code == 200
    rows = await served.rows("auditor")
    assert [row for row in rows if row[4] == "denied"] == []
    assert [(row[0], row[3]) for row in rows if row[7] == "req-delete"] == [("delete", f"agent::{agent_id}")]
