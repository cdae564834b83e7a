"""The published contract: /openapi.json is valid OpenAPI 3.1 of exactly the routes served; /docs works offline."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route

from ferryman.server.app import build_services, create_app
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from inprocess import migrated_sqlite

pytestmark = pytest.mark.anyio


@pytest.fixture()
def app(tmp_path: Path) -> Starlette:
    return create_app(build_services(SqliteStore(migrated_sqlite(tmp_path / "openapi.db")), [ScriptedModel()]))


@pytest.fixture()
async def http(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client:
        yield client


async def _document(http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    document: dict[str, Any] = response.json()
    return document


async def test_the_document_is_valid_openapi_3_1(http: httpx.AsyncClient) -> None:
    document = await _document(http)
    validate(document)
    assert document["openapi"] == "3.1.0"
    assert document["info"]["title"] == "ferryman" and document["info"]["version"]


def _served(routes: list[BaseRoute], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(path, method) of every Route under every Mount; Starlette's implicit HEAD left out."""
    for route in routes:
        if isinstance(route, Mount):
            yield from _served(route.routes, prefix + route.path)
        elif isinstance(route, Route) and prefix:
            path = re.sub(r"\{(\w+):\w+\}", r"{\1}", prefix + route.path)
            yield from ((path, method) for method in route.methods or () if method != "HEAD")


async def test_the_document_describes_exactly_the_routes_served(app: Starlette, http: httpx.AsyncClient) -> None:
    document = await _document(http)
    documented = {(path, method.upper()) for path, item in document["paths"].items() for method in item}
    served = set(_served(app.routes))
    assert served == documented
    assert ("/v1alpha/agents/{agent_id}/session/{session_id}/turn", "POST") in served
    assert ("/v1/responses", "POST") in served


async def test_streaming_routes_document_their_event_streams_and_headers(http: httpx.AsyncClient) -> None:
    paths = (await _document(http))["paths"]
    turn = "/v1/agents/{agent_id}/session/{session_id}/turn"
    streaming = [
        paths[turn]["post"],
        paths[f"{turn}/{{turn_id}}/resume"]["post"],
        paths[f"{turn}/{{turn_id}}/events"]["get"],
        paths["/v1/responses"]["post"],
        paths["/v1/responses/{response_id}"]["get"],
        paths["/v1/chat/completions"]["post"],
    ]
    for operation in streaming:
        assert "text/event-stream" in operation["responses"]["200"]["content"]
    headers = {p["name"] for p in paths[turn]["post"]["parameters"] if p["in"] == "header"}
    assert headers == {"X-LlamaStack-Provider-Data", "Idempotency-Key"}
    events = {p["name"] for p in paths[f"{turn}/{{turn_id}}/events"]["get"]["parameters"] if p["in"] == "header"}
    assert events == {"Last-Event-ID"}
    error = paths[turn]["post"]["responses"]["404"]["content"]["application/json"]["schema"]
    assert error == {"$ref": "#/components/schemas/ErrorResponse"}


async def test_every_post_that_creates_or_runs_accepts_an_idempotency_key(http: httpx.AsyncClient) -> None:
    paths = (await _document(http))["paths"]
    creating = {
        "/v1/agents",
        "/v1/agents/{agent_id}/session",
        "/v1/agents/{agent_id}/session/{session_id}/fork",
        "/v1/agents/{agent_id}/session/{session_id}/turn",
        "/v1/agents/{agent_id}/session/{session_id}/turn/{turn_id}/resume",
        "/v1/responses",
        "/v1/conversations",
        "/v1/conversations/{conversation_id}/fork",
        "/v1/conversations/{conversation_id}/items",
        "/v1/models",
        "/v1/toolgroups",
        "/v1/shields",
        "/v1/files",
        "/v1/vector_stores",
        "/v1/vector_stores/{vector_store_id}/files",
        "/v1/vector_stores/{vector_store_id}/file_batches",
        "/v1/vector-dbs",
        "/v1/vector-io/insert",
        "/v1/tool-runtime/rag-tool/insert",
        "/v1/tool-runtime/invoke",
        "/v1/schedules",
    }
    with_key = {
        path
        for path, item in paths.items()
        if path.startswith("/v1/")
        and any(p["name"] == "Idempotency-Key" for p in item.get("post", {}).get("parameters", []))
    }
    assert with_key == creating


async def test_agent_memory_routes_are_documented_with_their_shapes(http: httpx.AsyncClient) -> None:
    paths = (await _document(http))["paths"]
    block = "/v1/agents/{agent_id}/memory/{label}"
    assert set(paths["/v1/agents/{agent_id}/memory"]) == {"get"}
    assert set(paths[block]) == {"get", "put", "delete"}
    assert set(paths[f"{block}/versions"]) == {"get"}
    put = paths[block]["put"]
    assert {"409", "404", "400"} <= set(put["responses"])
    schema = put["requestBody"]["content"]["application/json"]["schema"]
    assert schema["$ref"].endswith("/PutMemoryBlockRequest")


async def test_webhook_deliveries_and_the_webhook_field_are_documented(http: httpx.AsyncClient) -> None:
    document = await _document(http)
    paths, schemas = document["paths"], document["components"]["schemas"]
    assert set(paths["/v1/webhook_deliveries"]) == {"get"}
    assert set(paths["/v1/webhook_deliveries/{delivery_id}"]) == {"get"}
    listed = paths["/v1/webhook_deliveries"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert listed["$ref"].endswith("/WebhookDeliveryList")
    assert {p["name"] for p in paths["/v1/webhook_deliveries"]["get"]["parameters"]} >= {"run_id", "after", "limit"}
    for request in ("CreateTurnRequest", "ResumeTurnRequest", "CreateResponseRequest"):
        webhook = schemas[request]["properties"]["webhook"]
        assert {"type": "string", "maxLength": 2048} in webhook["anyOf"], webhook
    assert set(schemas["WebhookDelivery"]["properties"]["type"]["enum"]) == {
        "turn.completed", "turn.failed", "turn.awaiting_input",
        "response.completed", "response.failed", "response.cancelled",
    }  # fmt: skip


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


async def test_docs_page_loads_only_local_assets_which_are_served(http: httpx.AsyncClient) -> None:
    page = await http.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    parser = _Assets()
    parser.feed(page.text)
    assert any(url.endswith("swagger-ui-bundle.js") for url in parser.urls)
    assert any(url.endswith("swagger-ui.css") for url in parser.urls)
    assert '"/openapi.json"' in page.text
    for url in parser.urls:
        assert url.startswith("/") and not url.startswith("//"), url
        asset = await http.get(url)
        assert asset.status_code == 200 and asset.content, url


async def test_docs_page_calls_no_outside_validator(http: httpx.AsyncClient) -> None:
    """Swagger UI's default ``validatorUrl`` sends the document's URL to an outside validator: set to none."""
    page = await http.get("/docs", headers={"Host": "ferryman.example.org"})
    found = re.search(r"SwaggerUIBundle\((\{.*?\})\);", page.text)
    assert found is not None, page.text
    config = json.loads(found.group(1))
    assert "validatorUrl" in config and config["validatorUrl"] is None
    assert config["url"] == "/openapi.json"


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        ("/v1/agents?limit=9223372036854775807", {}),
        ("/v1/agents?start_index=99999999999999999999", {}),
        ("/v1/responses/resp_x?stream=true&starting_after=9223372036854775808", {}),
        ("/v1/agents/a/session/s/turn/t/events", {"Last-Event-ID": "-9223372036854775809"}),
    ],
)
async def test_integers_beyond_what_the_stores_keep_are_400s_not_500s(
    app: Starlette, http: httpx.AsyncClient, url: str, headers: dict[str, str]
) -> None:
    async with app.router.lifespan_context(app):
        response = await http.get(url, headers=headers)
    assert response.status_code == 400, response.text


async def test_the_approval_inbox_is_documented_as_ferrymans_own(http: httpx.AsyncClient) -> None:
    paths = (await _document(http))["paths"]
    listing = paths["/v1/approvals"]["get"]
    assert listing["x-ferryman-extension"] is True
    assert {p["name"] for p in listing["parameters"]} == {"agent_id", "source", "after", "limit", "order"}
    assert listing["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ApprovalList"
    }
    for verdict in ("approve", "deny"):
        decide = paths[f"/v1/approvals/{{approval_id}}/{verdict}"]["post"]
        assert decide["x-ferryman-extension"] is True
        assert "200" not in decide["responses"] and {"202", "404", "409"} <= set(decide["responses"])
    assert "x-ferryman-extension" not in paths["/v1/responses"]["post"]


async def test_listing_conversations_and_responses_by_conversation_are_documented_as_ferrymans_own(
    http: httpx.AsyncClient,
) -> None:
    paths = (await _document(http))["paths"]
    listing = paths["/v1/conversations"]["get"]
    assert listing["x-ferryman-extension"] is True
    assert listing["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ConversationList"
    }
    responses = paths["/v1/responses"]["get"]
    assert "x-ferryman-extension" not in responses
    own = {p["name"] for p in responses["parameters"] if p.get("x-ferryman-extension")}
    assert own == {"conversation_id"}


async def test_schedules_are_documented_with_their_shapes(http: httpx.AsyncClient) -> None:
    document = await _document(http)
    paths, schemas = document["paths"], document["components"]["schemas"]
    assert set(paths["/v1/schedules"]) == {"get", "post"}
    assert set(paths["/v1/schedules/{schedule_id}"]) == {"get", "post", "delete"}
    assert set(paths["/v1/schedules/{schedule_id}/runs"]) == {"get"}
    create = paths["/v1/schedules"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/CreateScheduleRequest")
    assert any(p["name"] == "Idempotency-Key" for p in create["parameters"])
    runs = paths["/v1/schedules/{schedule_id}/runs"]["get"]["responses"]["200"]["content"]["application/json"]
    assert runs["schema"]["$ref"].endswith("/ScheduleRunList")
    assert {"agent_id", "cron", "message"} <= set(schemas["CreateScheduleRequest"]["required"])
    assert schemas["CreateScheduleRequest"]["properties"]["cron"]["maxLength"] == 256
