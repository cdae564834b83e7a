"""Each request's id and access line, and each turn's lifecycle lines, as the server logs them in JSON."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from storage_backends import unopened_store

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.logs import QUIET_LOGGERS, ContextFilter, JsonFormatter
from ferryman.server.app import Services, build_services, create_app
from ferryman.server.tracing import provider_installed
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.testing import ScriptedModel
from inprocess import serving
from support import WEATHER_TOOL

pytestmark = pytest.mark.anyio

GENERATED_ID = re.compile(r"[0-9a-f]{32}")


class Lines:
    """What the server logged, one JSON object per line, through the formatter ``--log-format json`` uses."""

    def __init__(self, stream: io.StringIO) -> None:
        self._stream = stream

    def all(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self._stream.getvalue().splitlines()]

    def raw(self) -> str:
        return self._stream.getvalue()

    def of(self, logger: str, **fields: Any) -> list[dict[str, Any]]:
        """The records of ``logger`` whose fields have the values given."""
        return [r for r in self.all() if r["logger"] == logger and all(r.get(k) == v for k, v in fields.items())]


@pytest.fixture()
def lines() -> Iterator[Lines]:
    """The log at INFO, as the server sets it up (the :data:`QUIET_LOGGERS`, the tests' client too, at WARNING)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in QUIET_LOGGERS)]
    levels = [logger.level for logger in loggers]
    loggers[0].addHandler(handler)
    for logger in loggers:
        logger.setLevel(logging.INFO if logger is loggers[0] else logging.WARNING)
    try:
        yield Lines(stream)
    finally:
        loggers[0].removeHandler(handler)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@pytest.fixture()
async def app(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[tuple[httpx.AsyncClient, Services]]:
    async with unopened_store("sqlite", tmp_path) as store:
        services = build_services(store, [scripted])
        async with serving(services) as http:
            yield http, services


async def _settled(services: Services) -> None:
    """Once no run is live: each ended and logged its end (woken by the runs, no polling)."""
    runner = services.runner
    async with asyncio.timeout(30):
        while live := [run for turn_id in runner.running() if (run := runner.run(turn_id))]:
            await asyncio.gather(*(run.settled.wait() for run in live))


async def _agent(http: httpx.AsyncClient, **config: Any) -> tuple[str, str]:
    body = {"model": "scripted-model", "instructions": "be brief", **config}
    agent_id = (await http.post("/v1/agents", json={"agent_config": body})).json()["agent_id"]
    answer = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    return agent_id, answer.json()["session_id"]


async def test_each_request_has_one_access_line_naming_its_route_not_its_path(
    app: tuple[httpx.AsyncClient, Services], lines: Lines
) -> None:
    http, _ = app
    agent_id, _ = await _agent(http)
    read = await http.get(f"/v1/agents/{agent_id}")
    missing = await http.get("/v1/no/such/thing")
    refused = await http.delete("/v1/agents")  # a route, not with this method: 405
    assert (read.status_code, missing.status_code, refused.status_code) == (200, 404, 405)
    [line] = lines.of("ferryman.access", request_id=read.headers["x-request-id"])
    assert (line["method"], line["route"], line["status"], line["principal"]) == (
        "GET",
        "/v1/agents/{agent_id}",
        200,
        None,
    )
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    # None unless an earlier test of this process installed a tracer provider (then requests are traced).
    assert (line["trace_id"] is None) is not provider_installed() and line["level"] == "INFO"
    assert agent_id not in lines.raw()  # neither in the access lines nor anywhere else
    [gone] = lines.of("ferryman.access", request_id=missing.headers["x-request-id"])
    assert (gone["route"], gone["status"]) == (None, 404) and "no/such" not in lines.raw()
    [wrong] = lines.of("ferryman.access", request_id=refused.headers["x-request-id"])
    assert (wrong["route"], wrong["status"]) == ("/v1/agents", 405)
    assert len(lines.of("ferryman.access")) == 5  # the agent, its session, and the three above


async def test_the_callers_request_id_is_echoed_and_a_new_one_made_otherwise(
    app: tuple[httpx.AsyncClient, Services], lines: Lines
) -> None:
    http, _ = app
    given = "0af7651916cd43dd8448eb211c80319c-req:1/2+3=@x"
    named = await http.get("/v1/health", headers={"X-Request-ID": given})
    assert named.headers["x-request-id"] == given
    made = await http.get("/v1/health")
    assert GENERATED_ID.fullmatch(made.headers["x-request-id"])
    for unsafe in (b"a" * 129, b"has space", b'quote"d', b"<script>", b"tab\there", "é".encode()):
        answer = await http.get("/v1/health", headers={"X-Request-ID": unsafe})
        replaced = answer.headers["x-request-id"]
        assert GENERATED_ID.fullmatch(replaced), unsafe
        assert [line["route"] for line in lines.of("ferryman.access", request_id=replaced)] == ["/v1/health"]
        assert unsafe.decode("latin-1") not in lines.raw()
    assert len(lines.of("ferryman.access", request_id=given)) == 1
    assert len({line["request_id"] for line in lines.of("ferryman.access")}) == 8


async def test_the_access_line_names_the_current_trace(app: tuple[httpx.AsyncClient, Services], lines: Lines) -> None:
    http, _ = app
    context = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, False, TraceFlags(1))
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    # Current here, and sent as well: the trace continued whether requests get server spans in this process or not.
    with trace.use_span(NonRecordingSpan(context)):
        answer = await http.get("/v1/health", headers={"traceparent": traceparent})
    [line] = lines.of("ferryman.access", request_id=answer.headers["x-request-id"])
    assert line["trace_id"] == "0af7651916cd43dd8448eb211c80319c"


async def test_a_paused_and_resumed_turn_logs_its_lifecycle_with_its_ids_and_each_requests_id(
    app: tuple[httpx.AsyncClient, Services], scripted: ScriptedModel, lines: Lines
) -> None:
    http, services = app
    agent_id, session_id = await _agent(http, client_tools=[WEATHER_TOOL])
    turns = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    scripted.enqueue_tool_call("get_weather", {"city": "Paris"})
    started = await http.post(
        turns, json={"messages": [{"role": "user", "content": "weather?"}]}, headers={"X-Request-ID": "start-1"}
    )
    paused = started.json()
    assert paused["status"] == "awaiting_input", started.text
    await _settled(services)
    turn_id = paused["turn_id"]
    ids = {"turn_id": turn_id, "session_id": session_id, "agent_id": agent_id}
    first = lines.of("ferryman.turns", **ids, request_id="start-1")
    assert [(r["event"], r.get("status"), r["message"]) for r in first] == [
        ("turn_started", None, "turn started"),
        ("turn_paused", "awaiting_input", "turn paused, awaiting input"),
    ]
    [call] = paused["output_message"]["tool_calls"]
    scripted.enqueue_text("sunny")
    answer = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "18C"}
    resumed = await http.post(
        f"{turns}/{turn_id}/resume", json={"tool_responses": [answer]}, headers={"X-Request-ID": "resume-2"}
    )
    assert resumed.json()["status"] == "completed", resumed.text
    await _settled(services)
    second = lines.of("ferryman.turns", **ids, request_id="resume-2")
    assert [(r["event"], r.get("status"), r["message"]) for r in second] == [
        ("turn_resumed", None, "turn resumed"),
        ("turn_finished", "completed", "turn finished: completed"),
    ]
    assert second[-1]["error_code"] is None


async def test_a_background_response_logs_its_turn_with_the_request_id_after_the_request_ended(
    app: tuple[httpx.AsyncClient, Services], scripted: ScriptedModel, lines: Lines
) -> None:
    http, services = app
    scripted.enqueue_text("later", gate="go")
    body = {"model": "scripted-model", "input": "hi", "background": True}
    answer = await http.post("/v1/responses", json=body, headers={"X-Request-ID": "bg-3"})
    assert answer.status_code == 200 and answer.json()["status"] == "queued", answer.text
    response_id = answer.json()["id"]
    [access] = lines.of("ferryman.access", request_id="bg-3")
    assert access["route"] == "/v1/responses" and not lines.of("ferryman.turns", event="turn_finished")
    scripted.script.open_gate("go")
    await _settled(services)
    logged = lines.of("ferryman.turns", request_id="bg-3", response_id=response_id)
    assert [r["event"] for r in logged] == ["turn_started", "turn_finished"]
    assert logged[-1]["status"] == "completed" and logged[-1]["turn_id"] and logged[-1]["session_id"]
    assert "agent_id" not in logged[-1]  # a response's turn has no agent


async def test_a_failed_turn_logs_its_failure_code(
    app: tuple[httpx.AsyncClient, Services], scripted: ScriptedModel, lines: Lines
) -> None:
    http, services = app
    agent_id, session_id = await _agent(http)
    scripted.enqueue_error(400, "bad request upstream")
    turn = await http.post(
        f"/v1/agents/{agent_id}/session/{session_id}/turn", json={"messages": [{"role": "user", "content": "x"}]}
    )
    assert turn.status_code == 502, turn.text
    await _settled(services)
    [started] = lines.of("ferryman.turns", event="turn_started", session_id=session_id)
    [ended] = lines.of("ferryman.turns", event="turn_finished", turn_id=started["turn_id"])
    assert (ended["status"], ended["error_code"]) == ("failed", "upstream_error")
    assert ended["message"] == "turn finished: failed (upstream_error)" and ended["level"] == "INFO"
    [access] = lines.of("ferryman.access", request_id=turn.headers["x-request-id"])
    assert access["status"] == 502 and ended["request_id"] == access["request_id"]


async def test_no_line_holds_an_api_key_with_authentication_on(
    tmp_path: Path, scripted: ScriptedModel, lines: Lines
) -> None:
    key, wrong = new_key(), new_key()
    async with unopened_store("sqlite", tmp_path) as store:
        services = build_services(
            store, [scripted], authenticator=BearerAuthenticator(ApiKeyAuthenticator(ApiKeys(store.kernel)), None)
        )
        async with serving(services) as http:
            await ApiKeys(store.kernel).create(key_record("ops", key, {"roles": ["admin"]}))
            scripted.enqueue_text("hello")
            auth = {"Authorization": f"Bearer {key}"}
            agent = await http.post(
                "/v1/agents", json={"agent_config": {"model": "scripted-model", "instructions": "x"}}, headers=auth
            )
            agent_id = agent.json()["agent_id"]
            session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=auth)
            turns = f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"
            done = await http.post(turns, json={"messages": [{"role": "user", "content": "hi"}]}, headers=auth)
            assert done.json()["status"] == "completed", done.text
            refused = await http.get("/v1/agents", headers={"Authorization": f"Bearer {wrong}"})
            assert refused.status_code == 401
            await _settled(services)
    raw = lines.raw()
    assert key not in raw and wrong not in raw and "Bearer" not in raw
    assert key[12:40] not in raw and wrong[12:40] not in raw  # nor any long piece of one
    [line] = lines.of("ferryman.access", route="/v1/agents/{agent_id}/session/{session_id}/turn")
    assert (line["principal"], line["status"]) == ("key:ops", 200)
    [denied] = lines.of("ferryman.access", request_id=refused.headers["x-request-id"])
    assert (denied["principal"], denied["status"]) == (None, 401)
    [audited] = lines.of("ferryman.audit", event="authentication_failed")
    assert audited["request_id"] == refused.headers["x-request-id"]


async def test_an_unexpected_failure_is_answered_and_logged_with_the_request_id(
    tmp_path: Path, scripted: ScriptedModel, lines: Lines
) -> None:
    async def fail(request: Request) -> Response:
        raise RuntimeError("a bug")

    async with unopened_store("sqlite", tmp_path) as store:
        app = create_app(build_services(store, [scripted]))
        app.router.routes.insert(0, Route("/v1/bug", fail))
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://f") as http,
        ):
            answer = await http.get("/v1/bug", headers={"X-Request-ID": "bug-4"})
    assert answer.status_code == 500 and answer.json()["error"]["code"] == "internal_error"
    assert answer.headers["x-request-id"] == "bug-4"
    [access] = lines.of("ferryman.access", request_id="bug-4")
    assert access["status"] == 500
    [failure] = [r for r in lines.all() if r["level"] == "ERROR"]
    assert failure["request_id"] == "bug-4" and "RuntimeError: a bug" in failure["exception"]
