"""The audit sink: a bounded queue, batches of one kernel write each, drops counted and warned, a final flush."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from ferryman.audit_settings import AuditSettings
from ferryman.auth.audit import AuditEntry, AuditScope, audit, auditing
from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.logs import current_request_id
from ferryman.services.audit_trail import AuditTrail
from ferryman.storage.domain.audit import AuditLog
from ferryman.storage.domain.kinds import AUDIT, SCHEMA
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.memory import MemoryKernel

pytestmark = pytest.mark.anyio

ALICE = Principal(PrincipalKind.API_KEY, "alice")


class CountingKernel(MemoryKernel):
    """The reference kernel, counting writes and able to fail them."""

    def __init__(self) -> None:
        super().__init__(SCHEMA)
        self.writes = 0
        self.failing = False
        self.written = asyncio.Event()

    async def write(self, batch: Sequence[ops.Op]) -> list[Any]:
        self.writes += 1
        if self.failing:
            raise ConnectionError("the database went away")
        done = await super().write(batch)
        self.written.set()
        return done


def _entry(resource: str) -> AuditEntry:
    return AuditEntry(1.0e9, "req", ALICE, "create", "create", resource, "allowed")


async def _stored(kernel: MemoryKernel) -> list[str]:
    (page,) = await kernel.read([ops.Page(AUDIT)])
    return [rec.body["resource"] for rec in page.items]


async def test_a_flush_writes_one_batch_per_write_in_order() -> None:
    kernel = CountingKernel()
    trail = AuditTrail(AuditLog(kernel), AuditSettings(batch_size=2))
    for i in range(5):
        trail.submit(_entry(f"agent::{i}"))
    assert kernel.writes == 0 and trail.waiting == 5  # submitting writes nothing
    await trail.flush()
    assert kernel.writes == 3 and trail.waiting == 0
    assert await _stored(kernel) == [f"agent::{i}" for i in range(5)]


async def test_a_full_queue_drops_counts_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    kernel = CountingKernel()
    trail = AuditTrail(AuditLog(kernel), AuditSettings(queue_size=2))
    with caplog.at_level(logging.WARNING, logger="ferryman.services.audit_trail"):
        for i in range(5):
            trail.submit(_entry(f"agent::{i}"))
        assert trail.dropped == 3
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == 1 and "audit.queue_size=2" in warnings[0]
        await trail.flush()
    assert await _stored(kernel) == ["agent::0", "agent::1"]
    assert "3 audit records were dropped" in caplog.records[-1].getMessage()


async def test_a_failed_write_loses_its_batch_only() -> None:
    kernel = CountingKernel()
    trail = AuditTrail(AuditLog(kernel), AuditSettings())
    trail.submit(_entry("agent::lost"))
    kernel.failing = True
    await trail.flush()
    kernel.failing = False
    trail.submit(_entry("agent::kept"))
    await trail.flush()
    assert trail.dropped == 1 and await _stored(kernel) == ["agent::kept"]


async def test_a_full_batch_is_written_at_once_and_stop_writes_the_rest() -> None:
    kernel = CountingKernel()
    trail = AuditTrail(AuditLog(kernel), AuditSettings(batch_size=2, flush_interval_seconds=3600))
    trail.start()
    trail.submit(_entry("agent::0"))
    trail.submit(_entry("agent::1"))  # a full batch wakes the task, long before the interval
    async with asyncio.timeout(10):
        await kernel.written.wait()
    trail.submit(_entry("agent::2"))
    await trail.stop()
    assert await _stored(kernel) == ["agent::0", "agent::1", "agent::2"]


async def test_audit_hands_records_to_the_current_scope_only() -> None:
    kernel = CountingKernel()
    trail = AuditTrail(AuditLog(kernel), AuditSettings())
    audit("create", "create", "agent::outside")  # no scope: only logged
    token = current_request_id.set("req-7")
    try:
        with auditing(AuditScope(trail, "DELETE", lambda: "/v1/agents/{agent_id}")), acting_as(ALICE):
            audit("denied", "read", "agent::a\n1", status=404)
    finally:
        current_request_id.reset(token)
    assert trail.waiting == 1
    await trail.flush()
    (page,) = await kernel.read([ops.Page(AUDIT)])
    [rec] = page.items
    assert rec.owner is not None and rec.owner.key == "key:alice"
    body = rec.body
    # A read refused while deleting is the delete's refusal; the id's newline is escaped.
    assert (body["action"], body["resource"], body["outcome"], body["status"]) == (
        "delete",
        "agent::a\\n1",
        "denied",
        404,
    )
    assert (body["principal"], body["request_id"], body["route"]) == ("key:alice", "req-7", "/v1/agents/{agent_id}")
