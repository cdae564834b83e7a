"""schemathesis against ferryman's own document, in process: no request a client can send is a 5xx or off-contract.

Every operation runs the examples, coverage and fuzzing phases (bounded: a few examples
each). Path parameters name real records (an agent, a session, a turn paused for a
client tool, a completed turn and its step, a response, a conversation and its item)
so that the routes behind the 404s are exercised too; deletes keep their random ids
so that the records stay for the other operations.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.config import SchemathesisConfig
from starlette.applications import Starlette
from starlette.testclient import TestClient

from ferryman.api.agents import AgentConfig, CreateTurnRequest
from ferryman.api.content import ToolDef, UserMessage
from ferryman.api.responses import CreateConversationRequest, CreateResponseRequest, MessageItem
from ferryman.server.app import build_services, create_app
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from ferryman.testing.scripted import Script

CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": 20240601,
        "generation": {"max-examples": 6},
        "phases": {
            "examples": {"enabled": True},
            "coverage": {"enabled": True},
            "fuzzing": {"enabled": True},
            "stateful": {"enabled": False},
        },
    }
)
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]


def _model() -> ScriptedModel:
    """The scripted model, answering every call that nobody scripted with the same text."""
    return ScriptedModel(script=Script(default_reply=ScriptedReply(text="fuzzed")))


async def _seed(db: Path) -> dict[str, str]:
    """Records for the path parameters, made through the services."""
    model = _model()
    services = build_services(SqliteStore(str(db)), [model])
    await services.store.open()
    await services.models.refresh()
    try:
        agents = services.agents
        weather = ToolDef(name="get_weather", description="weather", parameters=[])
        agent_id = await agents.create_agent(
            AgentConfig(model="scripted-model", instructions="be brief", client_tools=[weather])
        )
        session_id = await agents.create_session(agent_id, "fuzz")
        question = CreateTurnRequest(messages=[UserMessage(content="hello")])
        completed = await (await agents.start_turn(agent_id, session_id, question)).task
        model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
        paused = await (await agents.start_turn(agent_id, session_id, question)).task
        # New turns go to a session of their own: the paused turn would make them conflicts.
        free_session_id = await agents.create_session(agent_id, "new turns")
        assert paused.status == "awaiting_input"
        live = await services.responses.create(CreateResponseRequest(model="scripted-model", input="hi"), None)
        assert live.task is not None
        response = await live.task
        conversation = await services.conversations.create(
            CreateConversationRequest(items=[MessageItem(role="user", content="hi")])
        )
        item = (await services.conversations.list_items(conversation.id, None, 1, "asc")).items[0]
        return {
            "agent_id": agent_id,
            "session_id": session_id,
            "free_session_id": free_session_id,
            "turn_id": paused.turn_id,
            "completed_turn_id": completed.turn_id,
            "step_id": completed.steps[0].step_id,
            "response_id": response.id,
            "conversation_id": conversation.id,
            "item_id": item.id or "",
            "model_id": "scripted-model",
        }
    finally:
        await services.runner.shutdown()
        await services.store.close()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    db = tmp_path_factory.mktemp("schemathesis") / "fuzz.db"
    return db, asyncio.run(_seed(db))


@pytest.fixture()
def app(seeded: tuple[Path, dict[str, str]]) -> Starlette:
    """A fresh app (schemathesis runs its lifespan) over the seeded database."""
    return create_app(build_services(SqliteStore(str(seeded[0])), [_model()]))


def _served_document() -> dict[str, Any]:
    """The document as ``/openapi.json`` serves it (reading it needs no lifespan, so no database)."""
    app = create_app(build_services(SqliteStore(":memory:"), [_model()]))
    document: dict[str, Any] = TestClient(app).get("/openapi.json").json()
    return document


# Loaded at import: pytest parametrizes by operation at collection.
schema = schemathesis.openapi.from_dict(_served_document(), config=CONFIG)


@schema.parametrize()
@hypothesis.settings(deadline=None, database=None, suppress_health_check=list(hypothesis.HealthCheck))
def test_no_request_is_a_server_error_or_off_contract(
    case: Any, app: Starlette, seeded: tuple[Path, dict[str, str]]
) -> None:
    ids = seeded[1]
    if case.headers and case.headers.get("Idempotency-Key"):
        # A key repeated with another body is a 422 by design; fresh keys let the bodies reach the routes.
        case.headers["Idempotency-Key"] = uuid.uuid4().hex
    if case.method != "DELETE" and case.path_parameters:
        real = {name: ids[name] for name in case.path_parameters if name in ids}
        # Only where every parameter can be real: a real turn under a random session is just a 404.
        if len(real) == len(case.path_parameters):
            if case.path.endswith("/turn"):
                real["session_id"] = ids["free_session_id"]
            if "/step/" in case.path:
                real["turn_id"] = ids["completed_turn_id"]
            case.path_parameters = real
    # The scripted chat model is no guard model: as a moderations ``model`` its "fuzzed" verdict is a 502 by design.
    reaches_model = case.path not in ("/v1/models", "/v1/moderations")
    if isinstance(case.body, dict) and isinstance(case.body.get("model"), str) and reaches_model:
        case.body["model"] = "scripted-model"  # a model that exists, so that the request reaches it
    case.call_and_validate(app=app, checks=CHECKS)
