"""Ferryman on a real socket for the console's browser tests, and Debian's chromium for Playwright.

The app runs in this process under uvicorn, on its own event loop in a thread, on
a free port of 127.0.0.1 (chromium needs a real socket): API keys authenticate
(``auth=False``: none), the code interpreter runs in the bubblewrap sandbox, MCP servers on 127.0.0.1 are reachable,
inference comes from the scripted model, embeddings from the local MiniLM.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import httpx
import pytest
import uvicorn

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.inference.local_embeddings import LocalEmbeddingProvider, local_embeddings_available
from ferryman.knowledge.blobs import LocalBlobStore
from ferryman.sandbox import Sandbox
from ferryman.sandbox_settings import SandboxSettings
from ferryman.server.app import Services, build_services, create_app
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from inprocess import migrated_sqlite, scripted_provider
from mcp_servers import LOCAL_FETCH
from support import free_port

T = TypeVar("T")
HERE = Path(__file__).parent
CHROMIUM = os.environ.get("FERRYMAN_TEST_CHROMIUM", "/usr/bin/chromium")
"""Debian's chromium (``.ci/install-chromium``); Playwright's own browser builds are never downloaded."""
AXE = HERE / "node_modules" / "axe-core" / "axe.min.js"
"""axe-core, pinned by package-lock.json beside this file (``.ci/install-axe``)."""
SCREENSHOTS_ENV = "FERRYMAN_TEST_SCREENSHOTS"
"""Where screenshots of failed tests go (default: ``screenshots`` under the run's pytest temporary folder)."""
STARTUP_SECONDS = 30.0
CALL_SECONDS = 30.0


def unavailable(reason: str) -> NoReturn:
    """Skip a browser test that cannot run here, except under CI (which installs everything): fail there."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the browser tests may not be skipped)", pytrace=False)
    pytest.skip(reason)


def require_browser() -> None:
    """Skip (or, in CI, fail) unless chromium, axe-core, the sandbox and the embedding model are here."""
    if not Path(CHROMIUM).is_file():
        unavailable(f"{CHROMIUM} is missing: run .ci/install-chromium")
    if not AXE.is_file():
        unavailable(f"{AXE} is missing: run .ci/install-axe")
    if not local_embeddings_available():
        unavailable("all-MiniLM-L6-v2 is not installed (requirements/models.txt)")


@dataclass
class ConsoleServer:
    """The served app, its scripted model and the loop it runs on."""

    base_url: str
    script: Script
    services: Services
    loop: asyncio.AbstractEventLoop

    def call(self, function: Callable[[], Awaitable[T]]) -> T:
        """Run a coroutine function on the server's loop (where its state lives); its result."""
        return asyncio.run_coroutine_threadsafe(_called(function), self.loop).result(CALL_SECONDS)

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Queue the scripted model's next replies."""

        async def enqueue() -> None:
            self.script.enqueue(*replies)

        self.call(enqueue)

    def new_key(self, name: str) -> str:
        """A fresh API key for a principal called ``name``."""
        key = new_key()
        self.call(lambda: ApiKeys(self.services.store.kernel).create(key_record(name, key, {})))
        return key

    def api(self, key: str | None) -> httpx.Client:
        """An HTTP client of the server, sending ``key`` as a bearer token."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=CALL_SECONDS)

    def check_script(self) -> None:
        """Fail if a scripted reply was left unused or a call found none."""

        async def check() -> None:
            self.script.check()

        self.call(check)


async def _called(function: Callable[[], Awaitable[T]]) -> T:
    return await function()


@contextmanager
def console_server(tmp: Path, auth: bool = True) -> Iterator[ConsoleServer]:
    """Ferryman served on a free port of 127.0.0.1 until the block ends."""
    script = Script()
    store = SqliteStore(migrated_sqlite(tmp / "console.db"))
    authenticator = BearerAuthenticator(ApiKeyAuthenticator(ApiKeys(store.kernel)), None) if auth else None
    sandbox = Sandbox(SandboxSettings(dir=str(tmp / "sandbox"), cpu_seconds=5, wall_seconds=20))
    services = build_services(
        store,
        [scripted_provider(script), LocalEmbeddingProvider()],
        sole_process=True,
        authenticator=authenticator,
        sandbox=sandbox,
        blobs=LocalBlobStore(tmp / "files"),
        fetch=LOCAL_FETCH,  # the test MCP server, on 127.0.0.1
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(services),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=5,  # a stream a test left open does not hold the server up
        )
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started:  # uvicorn says so once its socket listens (no event to wait on)
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the console's server did not start on port {port}")
        time.sleep(0.05)
    try:
        yield ConsoleServer(f"http://127.0.0.1:{port}", script, services, loop)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        if thread.is_alive():
            raise RuntimeError("the console's server did not stop within 30 s")
        loop.close()


def agent(http: httpx.Client, name: str, **config: Any) -> str:
    """Create an agent of the scripted model; its id."""
    body = {"model": "scripted-model", "instructions": "Answer briefly.", "name": name, **config}
    created = http.post("/v1/agents", json={"agent_config": body})
    assert created.status_code == 200, created.text
    return str(created.json()["agent_id"])


def session(http: httpx.Client, agent_id: str) -> str:
    """Open a session of an agent; its id."""
    created = http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "browser"})
    assert created.status_code == 200, created.text
    return str(created.json()["session_id"])


def turn(http: httpx.Client, agent_id: str, session_id: str, text: str, **extra: Any) -> dict[str, Any]:
    """Run a turn to its end (or pause); the turn."""
    body = {"messages": [{"role": "user", "content": text}], **extra}
    answered = http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body)
    assert answered.status_code == 200, answered.text
    return dict(answered.json())
