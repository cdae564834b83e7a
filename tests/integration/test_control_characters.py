"""Ids and names holding control characters are refused (400) on every backend, wherever a request carries them.

NUL in an id was a 500 on PostgreSQL (its text columns cannot hold it) and, on SQLite,
left a record its owner could neither read nor list but nobody else could take. The
contract refuses C0 (NUL included), DEL and C1 characters in ids and names: in bodies,
in path parameters and in query parameters.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import unopened_store

from ferryman.server.app import build_services
from ferryman.testing import ScriptedModel
from inprocess import serving

pytestmark = pytest.mark.anyio

CONTROLS = ("\x00", "\x01", "\n", "\x1f", "\x7f", "\x85", "\x9f")
"""NUL, other C0 characters (a newline among them), DEL and C1 characters."""


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def http(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with unopened_store(request.param, tmp_path) as store:
        async with serving(build_services(store, [ScriptedModel()])) as client:
            yield client


def _refused(answer: httpx.Response, field: str | None = None, why: str = "control characters") -> None:
    assert answer.status_code == 400, (answer.request.url, answer.text)
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert why in error["message"], error
    if field is not None:
        assert error["field"] == field, error


PATHS = (
    "/v1/agents/abc%00def",
    "/v1/agents/a/session/s%09",
    "/v1/files/file-%00",
    "/v1/files/file-%00/content",
    "/v1/responses/resp_%7F",
    "/v1/responses/resp_1/input_items",
    "/v1/conversations/conv_%C2%85",
    "/v1/vector_stores/vs_%1F",
    "/v1/vector-dbs/db%00",
    "/v1/shields/s%00",
    "/v1/models/m%C2%9F",
    "/v1/toolgroups/mcp::g%01",
    "/v1/tools/t%00",
)


async def test_path_parameters_with_control_characters_are_refused(http: httpx.AsyncClient) -> None:
    for path in PATHS:
        if "%" not in path:  # the same route with a NUL in its id
            path = path.replace("resp_1", "resp_%00")
        _refused(await http.get(path))
    # A line break never reaches a route: the /v1 mount matches no path holding one.
    assert (await http.get("/v1/agents/a/session/s%0A")).status_code == 404
    _refused(await http.delete("/v1/agents/abc%00def"), "agent_id")
    _refused(await http.delete("/v1/shields/s%00"), "shield_id")


async def test_query_parameters_with_control_characters_are_refused(http: httpx.AsyncClient) -> None:
    for path in ("/v1/responses", "/v1/vector_stores", "/v1/files"):
        _refused(await http.get(path, params={"after": "resp_\x00"}), "after")
    _refused(await http.get("/v1/tools", params={"toolgroup_id": "g\x00"}), "toolgroup_id")
    conversation = (await http.post("/v1/conversations", json={})).json()["id"]
    _refused(await http.get(f"/v1/conversations/{conversation}/items", params={"after": "msg_\x7f"}), "after")
    long = await http.get("/v1/responses", params={"after": "r" * 257})
    assert long.status_code == 400 and long.json()["error"]["message"] == (
        "query parameter 'after' must be at most 256 characters long"
    )


async def _created(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
    return await http.post(path, json=body)


async def test_ids_and_names_with_control_characters_are_refused_and_nothing_is_stored(
    http: httpx.AsyncClient,
) -> None:
    for control in CONTROLS:
        shield = await _created(http, "/v1/shields", {"shield_id": f"s{control}", "provider_id": "ferryman-local"})
        _refused(shield, "shield_id")
        model = {"model_id": f"m{control}", "provider_id": "scripted", "provider_model_id": "scripted-model"}
        _refused(await _created(http, "/v1/models", model), "model_id")
        vector_db = {"vector_db_id": f"db{control}", "embedding_model": "all-MiniLM-L6-v2"}
        # Whitespace among them breaks the vector DB id's own pattern first.
        _refused(await _created(http, "/v1/vector-dbs", vector_db), "vector_db_id", "")
        _refused(await _created(http, "/v1/vector_stores", {"name": f"kb{control}"}), "name")
        group = {"toolgroup_id": f"mcp::g{control}", "provider_id": "model-context-protocol"}
        _refused(await _created(http, "/v1/toolgroups", group), "toolgroup_id")
        agent = {"agent_config": {"model": "scripted-model", "instructions": "", "name": f"a{control}"}}
        _refused(await _created(http, "/v1/agents", agent), "agent_config.name")
        in_shields = {"agent_config": {"model": "scripted-model", "instructions": "", "input_shields": [f"s{control}"]}}
        _refused(await _created(http, "/v1/agents", in_shields), "agent_config.input_shields.0")
        response = {"model": "scripted-model", "input": "hi", "previous_response_id": f"resp_{control}"}
        _refused(await _created(http, "/v1/responses", response), "previous_response_id")
    assert (await http.get("/v1/shields")).json()["data"] == []
    assert (await http.get("/v1/vector-dbs")).json()["data"] == []
    assert (await http.get("/v1/agents")).json()["data"] == []
    assert [m["identifier"] for m in (await http.get("/v1/models")).json()["data"]] == ["scripted-model"]

    agent_id = await _created(http, "/v1/agents", {"agent_config": {"model": "scripted-model", "instructions": ""}})
    session = await _created(http, f"/v1/agents/{agent_id.json()['agent_id']}/session", {"session_name": "s\x00"})
    _refused(session, "session_name")
    # Written by hand: httpx would percent-escape the control character in the file's name.
    form = (
        b'--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n'
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="a\x01.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\ntext\r\n--b--\r\n"
    )
    upload = await http.post("/v1/files", content=form, headers={"content-type": "multipart/form-data; boundary=b"})
    _refused(upload, "file")
    assert (await http.get("/v1/files")).json()["data"] == []


async def test_ids_without_control_characters_still_work(http: httpx.AsyncClient) -> None:
    shield_id = "щит/名前-é_1"  # any printable text, slashes too
    registered = await _created(http, "/v1/shields", {"shield_id": shield_id, "provider_id": "ferryman-local"})
    assert registered.status_code == 200, registered.text
    assert (await http.get(f"/v1/shields/{shield_id}")).json()["identifier"] == shield_id
    # The id the caller could not register is not taken by anything either: still unknown.
    assert (await http.get("/v1/shields/s")).status_code == 404


ITEMS = (
    {"type": "web_search_call", "id": "ws_\x00"},
    {"type": "file_search_call", "id": "fs_\x00"},
    {"type": "mcp_list_tools", "id": "mcpl_\x00", "server_label": "s"},
    {"type": "mcp_call", "id": "mcp_\x00", "server_label": "s", "name": "n", "arguments": "{}"},
    {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "s",
        "name": "n",
        "arguments": "{}",
        "approval_request_id": "a\x00",
    },
    {"type": "code_interpreter_call", "id": "ci_\x00", "container_id": "c"},
    {"type": "mcp_approval_request", "id": "mcpr_\x00", "server_label": "s", "name": "n", "arguments": "{}"},
)
"""Items of hosted calls as a client sends them back: their ids are stored as they are (a NUL: 500 on PostgreSQL)."""


async def test_ids_of_the_items_a_client_sends_with_control_characters_are_refused(http: httpx.AsyncClient) -> None:
    conversation = (await http.post("/v1/conversations", json={})).json()["id"]
    for item in ITEMS:
        field = f"items.0.{item['type']}.{'approval_request_id' if 'approval_request_id' in item else 'id'}"
        _refused(await http.post(f"/v1/conversations/{conversation}/items", json={"items": [item]}), field)
        _refused(await http.post("/v1/conversations", json={"items": [item]}), field)
        response = {"model": "scripted-model", "input": [item, {"role": "user", "content": "hi"}]}
        _refused(await http.post("/v1/responses", json=response), field.replace("items", "input", 1))
    assert (await http.get(f"/v1/conversations/{conversation}/items")).json()["data"] == []
    assert (await http.get("/v1/responses")).json()["data"] == []
