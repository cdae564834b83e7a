"""In-process services over a real SQLite file and the scripted model."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from inprocess import migrated_sqlite


@pytest.fixture()
async def services(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[Services]:
    """Services wired over a temporary database and the scripted model."""
    built = build_services(SqliteStore(migrated_sqlite(tmp_path / "unit.db")), [scripted])
    await built.store.open()
    await built.models.refresh()
    yield built
    await built.runner.shutdown()
    await built.store.close()


@pytest.fixture()
def caught(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """``caplog``, capturing the audit logger's INFO records (read them with ``audit_capture.audit_of``)."""
    with caplog.at_level(logging.INFO, logger="ferryman.audit"):
        yield caplog
