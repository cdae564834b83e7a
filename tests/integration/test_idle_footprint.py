"""A started server holds only what serving needs: the heavy features' modules load when first used.

``ferryman serve --inference-url …`` is run in its own process as far as its app's start (the CLI's
checks, the settings, the services, the lifespan: the store opened and migrated, the workers started),
then the modules it imported are read, on each kind of deployment: SQLite, PostgreSQL with Redis, and Redis
alone. Each heavy module named here was once imported at start whether used or not; together they held about
75 MiB of an idle server's 169 MiB (numpy, through pgvector's codec, another 15 MiB of a PostgreSQL server's).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from replicas import shared_state

LOADED_WHEN_USED = {
    "mcp": "the MCP SDK: the first request to an MCP server",
    "mcp_types": "the MCP SDK's types: the first MCP server's answer",
    "httpx2": "the MCP connections' HTTP client: the first MCP server named",
    "numpy": "vector search and embeddings: the first vector handled",
    "tokenizers": "MiniLM's tokenizer: the first text counted, chunked or embedded",
    "safetensors": "MiniLM's weights: the first embedding",
    "ferryman.inference.minilm": "the MiniLM forward pass: the first embedding",
    "cryptography": "compaction's sealing, and JWT verification",
    "jwt": "a JWKS token provider, where one is configured",
    "ferryman.auth.introspection": "an introspection token provider, where one is configured",
    "detect_secrets": "the local shield's secret detectors: the first message it inspects",
    "requests": "imported by detect-secrets",
    "opentelemetry.sdk": "the trace exporter: a process that exports traces",
    "google.protobuf": "the OTLP exporter's encoding: a process that exports traces",
    "ferryman.server.trace_export": "the trace exporter: a process that exports traces",
    "jinja2": "the embedded runtime's chat templates: an embedded model served",
    "ferryman.inference.embedded": "the embedded provider: an embedded model served",
    "httpx": "client-named URLs fetched, webhooks posted, web searches",
    "rich": "imported by httpx for its command line",
    "alembic": "a database's migration: `ferryman serve` runs it in a child process (cli/migrate_apart.py)",
    "openai": "the openai SDK: embeddings and requests passed through (chats and the model list go through http1.py)",
}
"""Each module an idle server must not have imported, and what loads it."""

BACKEND_MODULES = {
    "sqlite": "ferryman.storage.sql.sqlite",
    "postgres": "ferryman.storage.sql.pgvector",
    "redis": "ferryman.storage.redis.store",
}
"""A module each deployment's store loads: the probe served that backend, not another."""
REDIS_CLIENT_IMPORTS = {"cryptography", "opentelemetry.sdk"}
"""What ``redis.asyncio`` imports itself (redis-py's observability, since 7.x), wherever a deployment uses Redis."""

_PROBE = """
import asyncio, json, sys

import uvicorn


def started(app, **options):
    async def start_and_stop():
        async with app.router.lifespan_context(app):
            from ferryman.server.app import openapi

            print(json.dumps({"modules": sorted(sys.modules), "openapi_built": openapi.cache_info().currsize > 0}))

    asyncio.run(start_and_stop())


uvicorn.run = started  # 'ferryman serve' as it is, up to the app's start: no port is bound
from ferryman.cli.main import main

sys.exit(main(sys.argv[1:]))
"""


@contextmanager
def _deployment(kind: str, tmp_path: Path) -> Iterator[list[str]]:
    """The ``serve`` options of a fresh deployment of ``kind``: its database (and Redis)."""
    if kind == "sqlite":
        yield ["--db", str(tmp_path / "idle.db")]
        return
    with shared_state(kind) as (db, redis):
        yield ["--db", db, "--redis", redis]


def _started_server(options: list[str]) -> dict[str, object]:
    """What a ``ferryman serve`` process holds once its app has started."""
    command = [
        sys.executable,
        "-c",
        _PROBE,
        "serve",
        *options,
        # Nothing listens on the discard port: the start's model listing fails at once, as it may.
        "--inference-url",
        "http://127.0.0.1:9/v1",
        "--inference-retries",
        "0",
        "--log-level",
        "error",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    started: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return started


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_a_started_server_has_not_imported_what_only_its_features_use(kind: str, tmp_path: Path) -> None:
    with _deployment(kind, tmp_path) as options:
        started = _started_server(options)
    modules = set(started["modules"])  # type: ignore[call-overload]
    assert "ferryman.server.app" in modules and "uvicorn" in modules  # the probe ran the server's start
    assert BACKEND_MODULES[kind] in modules
    allowed = REDIS_CLIENT_IMPORTS if kind != "sqlite" else set()
    assert sorted(name for name in LOADED_WHEN_USED if name in modules - allowed) == []
    assert started["openapi_built"] is False  # built by the first GET /openapi.json
