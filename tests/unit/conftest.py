"""In-process services over a real SQLite file and the scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ferryman.server.app import Services, build_services
from ferryman.storage.sqlite import SqliteStore
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
