"""``Idempotency-Key``: a keyed stream with nothing to replay it from (``store: false``), whose client goes away
mid-stream, gives its key back, and stops renewing it, on every backend.

* ASGI spec 2.3 (uvicorn): Starlette cancels the streaming task; the release must not be cancelled with it.
* ASGI spec 2.4: Starlette stops at the failed ``send`` and never closes the body iterator; the key must not
  stay held (its lease renewed) for as long as the process runs.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import BACKENDS, unopened_store

from ferryman.server.app import build_services, create_app
from ferryman.storage.base import IdempotencyRecord, Store
from ferryman.testing import ScriptedReply
from inprocess import AskedModel

pytestmark = pytest.mark.anyio

KEY = "Idempotency-Key"
BODY = {"model": "scripted-model", "input": "hi", "stream": True, "store": False}


def _scope(body: bytes, key: str, spec_version: str) -> dict[str, Any]:
    headers = [
        (b"host", b"ferryman"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"idempotency-key", key.encode()),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": spec_version},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/responses",
        "raw_path": b"/v1/responses",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("ferryman", 80),
    }


async def _leave_then_retry(store: Store, scripted: AskedModel, spec_version: str) -> httpx.Response:
    """Stream a keyed unstored response, leave mid-stream, let the run end, and retry with the key."""
    released = asyncio.Event()
    release = store.release_idempotency_key

    async def releasing(claim: IdempotencyRecord) -> None:
        await release(claim)
        released.set()

    store.release_idempotency_key = releasing  # type: ignore[method-assign]
    services = build_services(store, [scripted])
    await services.store.open()
    await services.models.refresh()
    app = create_app(services)
    raw = json.dumps(BODY).encode()
    scripted.enqueue(ScriptedReply(text="unstored", gate="hold"))
    streaming, gone, sent = asyncio.Event(), asyncio.Event(), False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            if streaming.is_set() and spec_version >= "2.4":
                raise OSError("the client went away")  # how a 2.4 server tells a disconnect
            streaming.set()

    try:
        first = asyncio.create_task(app(_scope(raw, "left", spec_version), receive, send))
        await asyncio.wait_for(streaming.wait(), 10)
        await scripted.asked.wait()
        gone.set()
        scripted.script.open_gate("hold")
        await asyncio.wait([first], timeout=10)
        if first.done() and not first.cancelled():
            first.exception()  # a 2.4 server sees the disconnect raised out of the app: not what is tested here
        await asyncio.wait_for(released.wait(), 10)
        scripted.enqueue_text("again")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ferryman", timeout=30) as http:
            return await http.post("/v1/responses", json=BODY, headers={KEY: "left"})
    finally:
        await services.runner.shutdown()
        await services.store.close()


@pytest.mark.parametrize(("backend", "spec_version"), [(b, spec) for b in BACKENDS for spec in ("2.3", "2.4")])
async def test_a_client_that_leaves_an_unstored_stream_gives_its_key_back(
    tmp_path: Path, scripted: AskedModel, backend: str, spec_version: str
) -> None:
    async with unopened_store(backend, tmp_path) as store:
        again = await _leave_then_retry(store, scripted, spec_version)
    assert again.status_code == 200, f"the key is still held after its stream ended: {again.text}"
