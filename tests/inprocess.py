"""Ferryman served in this process, for route behaviour no real process needs.

Two ways in, both running the app's lifespan (store, fan-out, leases, models):
:func:`serving` gives an ``httpx.AsyncClient`` over ASGI for async tests;
:class:`Served` wraps Starlette's ``TestClient`` (sync, an ``httpx2``
client, streams as the app sends) for the sync tests, with the app on one event-loop thread, its portal.

:func:`scripted_provider` answers from a :class:`~ferryman.testing.Script`
through the OpenAI-compatible wire a real upstream speaks
(``ferryman.testing.server``'s app, called over ASGI): what ferryman sends
upstream stays under test, as it was with a scripted server process.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import httpx2
import pytest
from starlette.testclient import TestClient

from ferryman.errors import InvalidRequestError
from ferryman.inference.base import ChatChunk, ChatRequest, TextChunk
from ferryman.inference.openai_remote import OpenAICompatibleProvider
from ferryman.server.app import Services, build_services, create_app
from ferryman.storage.sql.migrate import upgrade_sqlite
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedModel, ScriptedReply
from ferryman.testing.scripted import Enqueuing
from ferryman.testing.server import build_app

T = TypeVar("T")

BASE_URL = "http://ferryman"
REQUEST_WAIT_SECONDS = 15.0
LEAVES_REPLIES = "leaves_replies"
"""The marker of a test that leaves scripted replies unused on purpose (say why)."""


def check_script(request: pytest.FixtureRequest, script: Script) -> None:
    """Fail the test if it left scripted replies unused (unless marked) or the model got an unscripted call."""
    script.check(allow_unused=request.node.get_closest_marker(LEAVES_REPLIES) is not None)


class AskedModel(ScriptedModel):
    """The scripted model, telling when it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        self.asked.set()
        async for chunk in super().stream_chat(request):
            yield chunk


class RefusingModel(ScriptedModel):
    """A model whose server refuses every request as invalid: a run that fails with a client error (400)."""

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        self.script.requests.append({"model": request.model})  # counted as the scripted model counts its own
        raise InvalidRequestError("the model's server found the request invalid")
        yield TextChunk("")  # pragma: no cover  (makes this a generator)


def scripted_provider(
    script: Script,
    model_ids: tuple[str, ...] = ("scripted-model",),
    provider_id: str = "remote",
    max_model_len: int | None = None,
) -> OpenAICompatibleProvider:
    """What ``ferryman serve --inference-url`` makes (``remote``, ``remote-2``…), on a scripted app over ASGI.

    ``max_model_len``, when given, is published in the app's model list, as vLLM does.
    """
    transport = httpx2.ASGITransport(app=build_app(script, list(model_ids), max_model_len))
    client = httpx2.AsyncClient(transport=transport, base_url="http://scripted/v1")
    return OpenAICompatibleProvider(provider_id, "http://scripted/v1", http_client=client)


@functools.cache
def _migrated_template() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="ferryman-template-"))
    atexit.register(shutil.rmtree, folder, True)
    upgrade_sqlite(str(folder / "head.db"))
    return folder / "head.db"


def migrated_sqlite(path: Path) -> str:
    """``path`` made a new SQLite file at the head of the migrations; returned as a string, as stores take it.

    It is a copy of a file this test process migrated once: migrating each
    test's database costs Alembic 20-30 ms. The store's ``open`` still runs
    on the copy (and finds nothing to do).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_migrated_template(), path)
    return str(path)


def served_services(db: Path, script: Script) -> Services:
    """The services ``ferryman serve --db DB --inference-url …`` builds, on the scripted provider."""
    return build_services(SqliteStore(str(db)), [scripted_provider(script)], sole_process=True)


@asynccontextmanager
async def serving(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app over ``services``, with the app's lifespan running."""
    app = create_app(services)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=30) as client,
    ):
        yield client


class Served(Enqueuing):
    """Ferryman in this process behind a ``TestClient``, and the script its model answers from.

    It is the ``model`` of the sync tests (same methods as
    :class:`~ferryman.testing.ScriptedServerClient`); ``http`` is the client.
    """

    def __init__(self, http: TestClient, script: Script, services: Services) -> None:
        self.http, self.script, self.services = http, script, services
        assert http.portal is not None, "the TestClient must be entered"
        self.portal = http.portal

    def call(self, function: Callable[[], Awaitable[T]]) -> T:
        """Run a coroutine function on the app's event loop (where its state lives); return its result."""
        return self.portal.call(function)

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Queue replies for the next requests."""
        self.portal.call(lambda: self.script.enqueue(*replies))

    def open_gate(self, name: str) -> None:
        """Release replies held on ``name``."""
        self.portal.call(self.script.open_gate, name)

    def requests(self) -> list[dict[str, Any]]:
        """The chat-completion bodies received so far."""
        return list(self.script.requests)

    def wait_for_requests(self, count: int) -> list[dict[str, Any]]:
        """The bodies received, once at least ``count`` arrived (woken by the script, no polling)."""

        async def arrived() -> list[dict[str, Any]]:
            async with asyncio.timeout(REQUEST_WAIT_SECONDS):
                return await self.script.wait_for_requests(count)

        return self.portal.call(arrived)

    def wait_settled(self) -> None:
        """Return once no run is live in the app: each ended and stored its outcome (woken by the runs, no polling)."""

        async def settled() -> None:
            runner = self.services.runner
            async with asyncio.timeout(REQUEST_WAIT_SECONDS):
                while live := [run for turn_id in runner.running() if (run := runner.run(turn_id))]:
                    await asyncio.gather(*(run.settled.wait() for run in live))

        self.portal.call(settled)

    def reset(self) -> None:
        """Forget queued replies, requests and gates."""
        self.portal.call(self.script.reset)

    def sdk_http_client(self) -> httpx2.Client:
        """A client of its own (SDKs close the client they are given) sending through this ``TestClient``.

        ``httpx2``, as the ``openai`` SDK and Starlette's ``TestClient`` use.
        """
        return httpx2.Client(
            transport=httpx2.MockTransport(lambda request: self.http.send(request, stream=True)), base_url=BASE_URL
        )

    def http_client(self, **options: Any) -> httpx.Client:
        """An ``httpx`` client (what ``llama-stack-client`` takes) sending through this ``TestClient``."""

        def forward(request: httpx.Request) -> httpx.Response:
            sent = self.http.send(
                self.http.build_request(
                    request.method, str(request.url), headers=request.headers.multi_items(), content=request.read()
                ),
                stream=True,
            )
            return httpx.Response(sent.status_code, headers=sent.headers.multi_items(), stream=_Body(sent))

        return httpx.Client(transport=httpx.MockTransport(forward), base_url=BASE_URL, **options)


class _Body(httpx.SyncByteStream):
    """A ``TestClient`` response's body, as it streams, for ``httpx``."""

    def __init__(self, response: httpx2.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        # Not ``iter_raw()``: that generator closes the response when it is collected, which can happen on
        # the app's event-loop thread, where the TestClient cannot close it (a flaky unraisable error).
        return iter(self._response.stream)  # type: ignore[arg-type]

    def close(self) -> None:
        self._response.close()


@contextmanager
def served(db: Path) -> Iterator[Served]:
    """Ferryman on a SQLite file at ``db`` and a fresh script, served in this process until exit."""
    script = Script()
    services = served_services(db, script)
    with TestClient(create_app(services), base_url=BASE_URL) as http:
        yield Served(http, script, services)


async def agent_and_session(http: httpx.AsyncClient, model: str = "scripted-model") -> tuple[str, str]:
    """Create an agent of ``model`` and a session of it."""
    created = await http.post("/v1/agents", json={"agent_config": {"model": model, "instructions": "Be brief."}})
    assert created.status_code == 200, created.text
    agent_id = created.json()["agent_id"]
    session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    assert session.status_code == 200, session.text
    return agent_id, session.json()["session_id"]
