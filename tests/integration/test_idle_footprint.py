"""A started server holds only what serving needs: the heavy features' modules load when first used.

``ferryman serve --inference-url …`` is run in its own process as far as its app's start (the CLI's
checks, the settings, the services, the lifespan: the store opened and migrated, the workers started),
then the modules it imported are read. Each heavy module named here was once imported at start whether
used or not; together they held about 75 MiB of an idle server's 169 MiB.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LOADED_WHEN_USED = {
    "mcp": "the MCP SDK: the first request to an MCP server",
    "mcp_types": "the MCP SDK's types: the first MCP server's answer",
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
    "openai": "the openai SDK: embeddings and requests passed through (chats and the model list go through http1.py)",
}
"""Each module an idle server must not have imported, and what loads it."""

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


def _started_server(tmp_path: Path) -> dict[str, object]:
    """What a ``ferryman serve`` process holds once its app has started."""
    command = [
        sys.executable,
        "-c",
        _PROBE,
        "serve",
        "--db",
        str(tmp_path / "idle.db"),
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


def test_a_started_server_has_not_imported_what_only_its_features_use(tmp_path: Path) -> None:
    started = _started_server(tmp_path)
    modules = set(started["modules"])  # type: ignore[call-overload]
    assert "ferryman.server.app" in modules and "uvicorn" in modules  # the probe ran the server's start
    assert sorted(name for name in LOADED_WHEN_USED if name in modules) == []
    assert started["openapi_built"] is False  # built by the first GET /openapi.json
