"""The sandbox's reaper, started by the first code run of some turn, logs under none of that turn's ids."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from ferryman.logs import ContextFilter, current_request_id, log_fields
from ferryman.sandbox.manager import Sandbox
from ferryman.sandbox_settings import SandboxSettings

pytestmark = pytest.mark.anyio


async def test_the_reaper_does_not_inherit_the_context_of_the_run_that_started_it(tmp_path: Path) -> None:
    sandbox = Sandbox(SandboxSettings(dir=str(tmp_path)))
    seen: asyncio.Future[logging.LogRecord] = asyncio.get_running_loop().create_future()

    async def reap_forever() -> None:  # what the reaper's own records would carry
        record = logging.makeLogRecord({"msg": "reaped"})
        ContextFilter().filter(record)
        seen.set_result(record)

    sandbox._reap_forever = reap_forever  # type: ignore[method-assign]
    named = current_request_id.set("request-1")
    try:
        with log_fields(turn_id="turn-1", session_id="session-1"):
            sandbox._start_reaper()
    finally:
        current_request_id.reset(named)
    record = await seen
    assert record.request_id is None
    assert not hasattr(record, "turn_id") and not hasattr(record, "session_id")
