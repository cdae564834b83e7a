"""The webhook worker's loop, on the memory kernel: it waits while busy, gives up crashing deliveries."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from ferryman.safe_fetch import FetchPolicy
from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.kernel.memory import MemoryKernel
from ferryman.webhook_settings import WebhookSettings
from ferryman.webhooks import worker as worker_module
from ferryman.webhooks.outbox import Outbox, StoredDelivery
from ferryman.webhooks.signing import new_secret
from ferryman.webhooks.worker import WebhookWorker

pytestmark = pytest.mark.anyio


class CountingWorker(WebhookWorker):
    """A worker that counts the beats of its loop."""

    beats = 0

    async def _claim(self) -> None:
        self.beats += 1
        await super()._claim()


async def test_a_saturated_worker_with_a_retry_due_waits_instead_of_spinning(tmp_path: Path) -> None:
    kernel = MemoryKernel(SCHEMA)
    await kernel.open()
    settings = WebhookSettings(secret=SecretStr(new_secret()), concurrency=1, poll_seconds=60)
    worker = CountingWorker(Outbox(kernel), settings, FetchPolicy())
    busy = asyncio.create_task(asyncio.Event().wait())
    worker._sending["msg_busy"] = busy  # every slot taken by an attempt still in flight
    worker._due = time.time() - 1  # and a retry it scheduled is due already
    await worker.start()
    for _ in range(200):  # each pass lets the loop run once more, if it does not wait
        await asyncio.sleep(0)
    assert worker.beats == 1
    await worker.stop()
    await kernel.close()


async def test_deliveries_older_than_the_retention_are_deleted_at_start() -> None:
    kernel = MemoryKernel(SCHEMA)
    await kernel.open()
    outbox = Outbox(kernel)
    now = time.time()
    for name, age_days in (("old", 3), ("new", 1)):
        delivery = StoredDelivery(
            id=f"msg_{name}", type="turn.completed", url="http://example.com/…", run_id=name, status="delivered",
            attempts=[], created_at=now - age_days * 86_400, target="", payload="",
        )  # fmt: skip
        await outbox.add(delivery, None)
    settings = WebhookSettings(secret=SecretStr(new_secret()), retention_days=2)
    worker = WebhookWorker(outbox, settings, FetchPolicy())
    await worker.start()
    async with asyncio.timeout(10):
        await worker.swept.wait()
    await worker.stop()
    assert [d.id for d in (await outbox.records.page()).items] == ["msg_new"]
    await kernel.close()


async def test_a_delivery_whose_attempts_crash_is_given_up_after_max_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = MemoryKernel(SCHEMA)
    await kernel.open()
    outbox = Outbox(kernel)
    now = time.time()
    delivery = StoredDelivery(
        id="msg_crash", type="turn.completed", url="http://example.com/…", run_id="run", status="pending",
        attempts=[], created_at=now, target="http://example.com/hook", payload="{}",
    )  # fmt: skip
    await outbox.add(delivery, None)
    posted: list[str] = []

    async def crashing(*args: object) -> None:
        posted.append("attempt")
        raise RuntimeError("the process dies mid-attempt")  # its claim lapses, recording nothing

    monkeypatch.setattr(worker_module, "post", crashing)
    worker = WebhookWorker(outbox, WebhookSettings(secret=SecretStr(new_secret()), max_attempts=3), FetchPolicy())
    worker._secret, worker._client = new_secret(), httpx.AsyncClient()
    for lapse in range(1, 6):  # each claim comes once the one before lapsed
        for claimed in await outbox.claim(now + lapse * 1000, 10, 10):
            await worker._deliver(claimed)
    await worker._client.aclose()
    given_up = await outbox.find("msg_crash")
    assert given_up is not None and given_up.value.status == "failed"
    assert "webhooks.max_attempts" in (given_up.value.attempts[-1].error or "")
    assert len(posted) == 3
    await kernel.close()
