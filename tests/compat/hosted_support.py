"""An in-process ferryman that may reach servers on 127.0.0.1 (the test MCP servers and search stand-ins)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
from starlette.testclient import TestClient

from ferryman.sandbox import Sandbox
from ferryman.server.app import build_services, create_app
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script
from ferryman.websearch_settings import WebSearchSettings
from inprocess import BASE_URL, Served, scripted_provider
from mcp_servers import LOCAL_FETCH


@contextmanager
def served_locally(
    db: Path, sandbox: Sandbox | None = None, websearch: WebSearchSettings | None = None
) -> Iterator[Served]:
    """Ferryman on a SQLite file whose fetch policy allows 127.0.0.1, served in this process until exit.

    ``sandbox`` runs the code interpreter (None: not offered); ``websearch`` picks the search provider.
    """
    script = Script()
    store = SqliteStore(str(db))
    services = build_services(
        store, [scripted_provider(script)], sole_process=True, fetch=LOCAL_FETCH, sandbox=sandbox, websearch=websearch
    )
    with TestClient(create_app(services), base_url=BASE_URL) as http:
        yield Served(http, script, services)


@contextmanager
def sdk(server: Served) -> Iterator[openai.OpenAI]:
    """The real ``openai`` SDK on ``server``, never retrying."""
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=server.sdk_http_client(), api_key="unused", max_retries=0, timeout=30
    ) as client:
        yield client
