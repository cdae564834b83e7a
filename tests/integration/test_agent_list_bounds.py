"""The Agents API's lists (agents, an agent's sessions) are bounded: ``server.max_page_items`` items at most.

Llama Stack answered a list without ``limit`` with everything; an agent's sessions come with their turns, so that
answer grew without bound. A page asked without ``limit`` now holds ``server.max_page_items`` items, with
``has_more`` when more follow (``ferryman.client`` pages on through them), and a larger ``limit`` is refused,
naming the setting.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from integration_helpers import assert_error
from storage_backends import unopened_store

from ferryman.config import Settings, load_settings
from ferryman.errors import ConfigurationError
from ferryman.server.app import build_services
from ferryman.testing import ScriptedModel
from inprocess import serving

pytestmark = pytest.mark.anyio

MOST = 3
AGENT = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}


@pytest.fixture()
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with unopened_store("sqlite", tmp_path) as store:
        services = build_services(store, [ScriptedModel()], max_page_items=MOST)
        async with serving(services) as client:
            yield client


async def test_a_list_without_limit_holds_the_most_a_page_may(http: httpx.AsyncClient) -> None:
    made = [(await http.post("/v1/agents", json=AGENT)).json()["agent_id"] for _ in range(MOST + 2)]
    first = (await http.get("/v1/agents")).json()
    assert [a["agent_id"] for a in first["data"]] == made[:MOST] and first["has_more"]
    rest = (await http.get("/v1/agents", params={"start_index": MOST})).json()
    assert [a["agent_id"] for a in rest["data"]] == made[MOST:] and not rest["has_more"]
    agent_id = made[0]
    sessions = [
        (await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": f"s{n}"})).json()["session_id"]
        for n in range(MOST + 1)
    ]
    page = (await http.get(f"/v1/agents/{agent_id}/sessions")).json()
    assert [s["session_id"] for s in page["data"]] == sessions[:MOST] and page["has_more"]
    whole = (await http.get(f"/v1/agents/{agent_id}/sessions", params={"limit": MOST})).json()
    assert whole == page


@pytest.mark.parametrize("path", ["/v1/agents", "/v1alpha/agents", "/v1/agents/agent_x/sessions"])
async def test_a_limit_past_the_most_is_refused_naming_the_setting(http: httpx.AsyncClient, path: str) -> None:
    error = assert_error(await http.get(path, params={"limit": MOST + 1}), 400)
    assert error["field"] == "limit"
    assert "server.max_page_items" in error["message"] and str(MOST) in error["message"]


def test_the_setting_is_read_from_the_server_section(tmp_path: Path) -> None:
    assert Settings().max_page_items == 1_000
    config = tmp_path / "ferryman.yaml"
    config.write_text("server:\n  max_page_items: 150\n")
    assert load_settings(str(config)).max_page_items == 150
    for refused in (99, 100_001):  # the console asks for pages of 50
        config.write_text(f"server:\n  max_page_items: {refused}\n")
        with pytest.raises(ConfigurationError, match="max_page_items"):
            load_settings(str(config))
