"""A serving process settles its heap once it has started (``server/heap.py``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferryman.server.app import build_services, create_app
from ferryman.server.heap import settle_heap
from ferryman.storage.sql.sqlite import SqliteStore
from inprocess import migrated_sqlite


class _Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture()
def thawed() -> Iterator[None]:
    """Nothing frozen before or after the test (frozen objects would outlive it in this process)."""
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()


def test_settling_collects_the_garbage_then_freezes_what_is_alive(thawed: None) -> None:
    garbage = _Node()
    freed = weakref.ref(garbage)
    alive = _Node()
    del garbage
    settle_heap()
    assert freed() is None  # collected, not frozen with the rest
    assert gc.get_freeze_count() > 0
    assert gc.is_tracked(alive) and alive.me is alive


@pytest.mark.anyio
@pytest.mark.parametrize("settle", [True, False])
async def test_only_an_app_made_to_serve_settles_at_its_start(thawed: None, tmp_path: Path, settle: bool) -> None:
    app = create_app(build_services(SqliteStore(migrated_sqlite(tmp_path / "heap.db")), []), settle=settle)
    async with app.router.lifespan_context(app):
        assert (gc.get_freeze_count() > 0) is settle
