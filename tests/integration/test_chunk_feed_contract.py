"""The chunk feed (what a store's chunks became since a version) on every backend that has one.

Each test also keeps a mirror: an index of ``(chunk id -> entry)`` that applies
the changes as ``storage/search/chunk_feed.py`` orders them, and checks after every
write that it holds what a complete answer holds. A backend joins with one
name in ``FEED_BACKENDS``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from storage_backends import BACKENDS
from test_sql_migrations import Database, _insert, database  # noqa: F401 (the fixture, found by its name here)

from ferryman.storage.base import Store
from ferryman.storage.knowledge import ChunkRecord, VectorStoreFileRecord, VectorStoreRecord
from ferryman.storage.search.chunk_feed import ChunkChanges, ChunkEntry, ChunkFeed, ChunkRemoval

pytestmark = pytest.mark.anyio

FEED_BACKENDS = ["sqlite", "postgres", "redis"]
SQL_BACKENDS = ["sqlite", "postgres"]
NOW = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


@pytest.fixture(params=FEED_BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


@pytest.fixture(params=SQL_BACKENDS)
async def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


def vec(*values: float) -> bytes:
    array = np.asarray(values, dtype=np.float32)
    return (array / np.linalg.norm(array)).astype("<f4").tobytes()


def a_store(vector_store_id: str = "vs_1") -> VectorStoreRecord:
    return VectorStoreRecord(
        vector_store_id=vector_store_id, name="docs", created_at=100, embedding_model="m", embedding_dimension=3
    )


def chunk(chunk_id: str, text: str, file_id: str = "file_a", vector_store_id: str = "vs_1") -> ChunkRecord:
    return ChunkRecord(
        chunk_id=chunk_id,
        vector_store_id=vector_store_id,
        file_id=file_id,
        position=int(chunk_id.rsplit("_", 1)[-1]) if chunk_id[-1].isdigit() else 0,
        text=text,
        embedding=vec(len(text), 1, 0),
    )


async def changes(store: Store, vector_store_id: str, since: int | None, **asked: bool) -> ChunkChanges:
    found = await cast(ChunkFeed, store).chunk_changes(
        vector_store_id, since, texts=asked.get("texts", True), embeddings=asked.get("embeddings", True)
    )
    assert found is not None
    return found


async def version_of(store: Store, vector_store_id: str = "vs_1") -> int:
    return (await changes(store, vector_store_id, None, texts=False, embeddings=False)).version


async def ingest(store: Store, vector_store_id: str, file_id: str, chunks: list[ChunkRecord]) -> None:
    """Attach a file (again) and finish its ingestion with these chunks."""
    await store.add_vector_store_files(
        vector_store_id, [VectorStoreFileRecord(vector_store_id=vector_store_id, file_id=file_id, created_at=100)]
    )
    (job,) = await store.claim_ingestion(NOW, NOW + LEASE, 100)
    assert await store.finish_ingestion(replace(job, status="completed"), chunks, NOW + LEASE)


class Mirror:
    """An index of one store kept from the feed, as an in-process index is."""

    def __init__(self, store: Store, vector_store_id: str = "vs_1") -> None:
        self.store = store
        self.vector_store_id = vector_store_id
        self.version: int | None = None
        self.chunks: dict[str, ChunkEntry] = {}

    def apply(self, found: ChunkChanges) -> None:
        if found.complete:
            self.chunks = {}
        for removal in found.removed:
            self.chunks = {
                chunk_id: entry
                for chunk_id, entry in self.chunks.items()
                if not (entry.version < removal.version and _names(removal, entry))
            }
        for entry in found.added:
            self.chunks[entry.chunk_id] = entry
        self.version = found.version

    async def sync(self) -> ChunkChanges:
        """Catch up, check that the mirror holds what a complete answer does, and return the changes applied."""
        found = await changes(self.store, self.vector_store_id, self.version)
        self.apply(found)
        whole = await changes(self.store, self.vector_store_id, None)
        assert whole.complete
        assert whole.removed == []
        assert self.version == whole.version
        assert sorted(self.chunks.values(), key=lambda e: e.chunk_id) == sorted(whole.added, key=lambda e: e.chunk_id)
        return found


def _names(removal: ChunkRemoval, entry: ChunkEntry) -> bool:
    if removal.chunk_id is not None:
        return entry.chunk_id == removal.chunk_id
    return entry.file_id == removal.file_id


async def test_a_complete_answer_holds_every_chunk_with_what_was_asked(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    await store.add_chunks("vs_1", [chunk("c_0", "alpha"), chunk("c_1", "beta", file_id="file_b")])
    whole = await changes(store, "vs_1", None)
    assert (whole.complete, whole.removed) == (True, [])
    assert {(e.chunk_id, e.file_id, e.text, e.embedding) for e in whole.added} == {
        ("c_0", "file_a", "alpha", vec(5, 1, 0)),
        ("c_1", "file_b", "beta", vec(4, 1, 0)),
    }
    assert {e.version for e in whole.added} == {whole.version}
    bare = await changes(store, "vs_1", None, texts=False, embeddings=False)
    assert {(e.chunk_id, e.text, e.embedding) for e in bare.added} == {("c_0", "", b""), ("c_1", "", b"")}


async def test_nothing_changed_since_the_current_version(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    await store.add_chunks("vs_1", [chunk("c_0", "alpha")])
    version = await version_of(store)
    assert await changes(store, "vs_1", version) == ChunkChanges(version, False, [], [])


async def test_chunks_added_since_a_version_come_alone(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    mirror = Mirror(store)
    await mirror.sync()
    await store.add_chunks("vs_1", [chunk("c_0", "alpha")])
    before = await version_of(store)
    await mirror.sync()
    await store.add_chunks("vs_1", [chunk("c_1", "beta"), chunk("c_2", "gamma")])
    found = await mirror.sync()
    assert (found.complete, found.removed) == (False, [])
    assert found.version > before
    assert [(e.chunk_id, e.text, e.version) for e in found.added] == [
        ("c_1", "beta", found.version),
        ("c_2", "gamma", found.version),
    ]


async def test_a_detached_file_is_one_removal_at_the_version_that_detached_it(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    await ingest(store, "vs_1", "file_a", [chunk("c_0", "alpha"), chunk("c_1", "beta")])
    await ingest(store, "vs_1", "file_b", [chunk("d_0", "gamma", file_id="file_b")])
    mirror = Mirror(store)
    await mirror.sync()
    await store.delete_vector_store_file("vs_1", "file_a")
    found = await mirror.sync()
    assert (found.complete, found.added) == (False, [])
    assert found.removed == [ChunkRemoval(found.version, "file_a")]
    assert set(mirror.chunks) == {"d_0"}


async def test_a_deleted_file_is_removed_from_every_store_it_was_in(store: Store) -> None:
    mirrors = []
    for vector_store_id in ("vs_1", "vs_2"):
        await store.create_vector_store(a_store(vector_store_id), [])
        await ingest(
            store, vector_store_id, "file_a", [chunk(f"{vector_store_id}_0", "alpha", "file_a", vector_store_id)]
        )
        await store.add_chunks(vector_store_id, [chunk(f"{vector_store_id}_k", "kept", "doc", vector_store_id)])
        mirrors.append(Mirror(store, vector_store_id))
        await mirrors[-1].sync()
    await store.forget_file("file_a")
    for mirror in mirrors:
        found = await mirror.sync()
        assert (found.added, found.removed) == ([], [ChunkRemoval(found.version, "file_a")])
        assert set(mirror.chunks) == {f"{mirror.vector_store_id}_k"}


async def test_a_file_ingested_again_is_removed_then_added_at_a_higher_version(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    await ingest(store, "vs_1", "file_a", [chunk("c_0", "alpha"), chunk("c_1", "beta")])
    mirror = Mirror(store)
    await mirror.sync()
    # Ingested again with the same chunk ids: the removal must not take the new chunks along.
    await ingest(store, "vs_1", "file_a", [chunk("c_0", "alpha two")])
    found = await mirror.sync()
    assert not found.complete
    (removal,) = found.removed
    assert removal.file_id == "file_a"
    assert removal.chunk_id is None
    assert [(e.chunk_id, e.text) for e in found.added] == [("c_0", "alpha two")]
    assert found.added[0].version >= removal.version
    assert set(mirror.chunks) == {"c_0"}


async def test_a_chunk_moved_to_another_file_by_id_is_removed_from_its_old_one_and_comes_again(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    await store.add_chunks("vs_1", [chunk("c_0", "alpha"), chunk("c_1", "beta")])
    mirror = Mirror(store)
    await mirror.sync()
    await store.add_chunks("vs_1", [chunk("c_0", "alpha again", file_id="file_b")])
    found = await mirror.sync()
    assert [(r.file_id, r.chunk_id) for r in found.removed] == [("file_a", "c_0")]
    assert [(e.chunk_id, e.file_id, e.text) for e in found.added] == [("c_0", "file_b", "alpha again")]


async def test_a_chunk_moved_to_a_file_removed_before_an_index_catches_up_is_gone_from_it(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    await ingest(store, "vs_1", "file_b", [chunk("other_1", "gamma", "file_b")])
    await store.add_chunks("vs_1", [chunk("c_1", "alpha alpha alpha"), chunk("c_2", "alpha words here more")])
    mirror = Mirror(store)
    await mirror.sync()
    assert [hit.chunk.chunk_id for hit in await store.keyword_search("vs_1", "alpha", None, 1)] == ["c_1"]
    await store.add_chunks("vs_1", [chunk("c_1", "alpha alpha alpha", "file_b")])
    await store.delete_vector_store_file("vs_1", "file_b")
    await mirror.sync()
    assert "c_1" not in mirror.chunks
    assert [hit.chunk.chunk_id for hit in await store.keyword_search("vs_1", "alpha", None, 1)] == ["c_2"]


async def test_an_index_ahead_of_the_store_gets_the_store_whole(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    await store.add_chunks("vs_1", [chunk("c_0", "alpha")])
    version = await version_of(store)
    found = await changes(store, "vs_1", version + 1)
    assert found.complete
    assert [e.chunk_id for e in found.added] == ["c_0"]


async def test_a_store_larger_than_one_read_comes_whole_and_then_by_its_changes(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    many = [chunk(f"c_{n}", f"word{n} alpha") for n in range(2_500)]
    for start in range(0, len(many), 500):
        await store.add_chunks("vs_1", many[start : start + 500])
    mirror = Mirror(store)
    first = await mirror.sync()
    assert first.complete and len(first.added) == 2_500
    assert {e.text for e in first.added} == {c.text for c in many}
    assert {e.embedding for e in first.added} == {c.embedding for c in many}
    await store.add_chunks("vs_1", [chunk("c_9999", "omega")])
    found = await mirror.sync()
    assert [e.chunk_id for e in found.added] == ["c_9999"]


async def test_no_such_store_has_no_changes(store: Store) -> None:
    feed = cast(ChunkFeed, store)
    assert await feed.chunk_changes("vs_none", None, texts=True, embeddings=True) is None
    await store.create_vector_store(a_store(), [])
    await store.add_chunks("vs_1", [chunk("c_0", "alpha")])
    version = await version_of(store)
    await store.delete_vector_store("vs_1")
    assert await feed.chunk_changes("vs_1", version, texts=True, embeddings=False) is None


async def test_a_store_made_again_under_its_id_is_sent_whole(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    await store.add_chunks("vs_1", [chunk("c_0", "alpha")])
    mirror = Mirror(store)
    await mirror.sync()
    await store.delete_vector_store("vs_1")
    await store.create_vector_store(a_store(), [])
    await store.add_chunks("vs_1", [chunk("c_1", "beta")])
    await mirror.sync()
    assert set(mirror.chunks) == {"c_1"}


async def test_removals_older_than_those_kept_make_the_answer_complete(
    sql_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ferryman.storage.sql import chunk_changes

    monkeypatch.setattr(chunk_changes, "REMOVALS_KEPT", 3)
    await sql_store.create_vector_store(a_store(), [])
    await ingest(sql_store, "vs_1", "file_a", [chunk("c_0", "alpha")])
    behind, mirror = Mirror(sql_store), Mirror(sql_store)
    await behind.sync()
    await mirror.sync()
    for n in range(1, 4):  # each a removal of the file and chunks added
        await ingest(sql_store, "vs_1", "file_a", [chunk(f"c_{n}", f"text {n}")])
        found = await mirror.sync()
        assert not found.complete
    found = await behind.sync()
    assert found.complete
    assert set(behind.chunks) == {"c_3"}


async def test_removals_of_chunks_replaced_by_id_are_kept_bounded_too(
    sql_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ferryman.storage.sql import chunk_changes

    monkeypatch.setattr(chunk_changes, "REMOVALS_KEPT", 3)
    await sql_store.create_vector_store(a_store(), [])
    await sql_store.add_chunks("vs_1", [chunk("c_0", "alpha")])
    behind = Mirror(sql_store)
    await behind.sync()
    for n in range(6):  # only replacements: no file is ever removed
        await sql_store.add_chunks("vs_1", [chunk("c_0", f"alpha {n}")])
    found = await changes(sql_store, "vs_1", (await version_of(sql_store)) - 5)
    assert found.complete  # the oldest replacements' removals were pruned
    assert len((await changes(sql_store, "vs_1", (await version_of(sql_store)) - 2)).removed) == 2
    await behind.sync()
    assert behind.chunks["c_0"].text == "alpha 5"


async def test_keyword_search_finds_a_chunk_right_after_it_is_written_and_not_after_it_is_deleted(
    store: Store,
) -> None:
    await store.create_vector_store(a_store(), [])
    await ingest(store, "vs_1", "file_a", [chunk("c_0", "the ferry crosses the river")])
    assert [hit.chunk.chunk_id for hit in await store.keyword_search("vs_1", "river", None, 5)] == ["c_0"]
    await store.add_chunks("vs_1", [chunk("d_0", "a harbour by the sea", file_id="doc")])
    assert [hit.chunk.chunk_id for hit in await store.keyword_search("vs_1", "harbour", None, 5)] == ["d_0"]
    await store.delete_vector_store_file("vs_1", "file_a")
    assert await store.keyword_search("vs_1", "river", None, 5) == []
    assert [hit.chunk.chunk_id for hit in await store.keyword_search("vs_1", "harbour", None, 5)] == ["d_0"]


async def test_vector_search_finds_a_chunk_right_after_it_is_written_and_not_after_it_is_deleted(
    store: Store,
) -> None:
    await store.create_vector_store(a_store(), [])
    near = [float(x) for x in np.frombuffer(vec(16, 1, 0), dtype="<f4")]
    await ingest(store, "vs_1", "file_a", [chunk("c_0", "alpha")])
    assert [hit.chunk.chunk_id for hit in await store.vector_search("vs_1", near, None, 1)] == ["c_0"]
    await store.add_chunks("vs_1", [chunk("d_0", "omega, the nearer", file_id="doc")])  # vec(16, 1, 0)
    assert [hit.chunk.chunk_id for hit in await store.vector_search("vs_1", near, None, 1)] == ["d_0"]
    await store.delete_vector_store_file("vs_1", "file_a")
    assert [hit.chunk.chunk_id for hit in await store.vector_search("vs_1", near, None, 5)] == ["d_0"]


async def test_a_removal_waiting_on_another_writer_of_the_store_removes_what_it_wrote(
    tmp_path: Path,
) -> None:
    """PostgreSQL: a writer that holds the store's version blocks the next; versions commit in order."""
    async with BACKENDS["postgres"](tmp_path) as store:
        await store.create_vector_store(a_store(), [])
        await ingest(store, "vs_1", "file_a", [chunk("c_0", "alpha")])
        mirror = Mirror(store)
        await mirror.sync()
        held, blocked = await _writer_holding_the_store(store, [chunk("c_1", "beta")])
        async with held as first_version:
            detach = asyncio.create_task(store.delete_vector_store_file("vs_1", "file_a"))
            await blocked()
            # Not yet committed: a reader sees neither write.
            assert (await changes(store, "vs_1", mirror.version)).added == []
        await detach
        found = await mirror.sync()
        assert found.version > first_version
        # The detach came second: it removed the chunk the first writer added, and the mirror dropped it too.
        assert found.removed == [ChunkRemoval(found.version, "file_a")]
        assert mirror.chunks == {}


async def _writer_holding_the_store(store: Store, chunks: list[ChunkRecord]) -> tuple[Any, Any]:
    """A unit that moves the store's version and adds chunks on its own connection, committed when left;
    and a wait for another connection to be blocked behind it."""
    from contextlib import asynccontextmanager

    from ferryman.storage.sql.chunk_changes import insert_chunks, moved_or_missing
    from ferryman.storage.sql.postgres import _run

    driver: Any = cast(Any, store)._db
    holder = await driver._pool.acquire()
    pid = await holder.fetchval("SELECT pg_backend_pid()")

    def work() -> Any:
        version = yield from moved_or_missing("vs_1")
        yield from insert_chunks(driver.dialect, "vs_1", chunks, version)
        return version

    @asynccontextmanager
    async def held() -> AsyncIterator[int]:
        try:
            async with holder.transaction():
                yield await _run(holder, work())
        finally:
            await driver._pool.release(holder)

    async def blocked() -> None:
        async with driver._pool.acquire() as watcher:
            while not await watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", pid
            ):
                pass  # each look is a round trip to the server: it waits on the server, not on a timer

    return held(), blocked


# -- the migration (0018) -------------------------------------------------------------------------------------------


async def test_chunks_from_before_the_feed_have_version_zero_and_come_in_a_complete_answer(
    database: Database,  # noqa: F811 (the fixture imported above)
) -> None:
    await database.migrate("0017_vector_indexes", False)
    await database.query(
        _insert(
            "vector_stores",
            vector_store_id="vs_old",
            name="docs",
            created_at=100,
            embedding_model="m",
            embedding_dimension=3,
            metadata="{}",
            chunking_strategy="{}",
            last_active_at=100,
            version=7,
        )
    )
    embedding = f"X'{vec(1, 0, 0).hex()}'" if database.dialect == "sqlite" else "'[1,0,0]'"
    await database.query(
        "INSERT INTO chunks (vector_store_id, chunk_id, file_id, position, text, token_count, metadata, embedding) "
        f"VALUES ('vs_old', 'c_old', 'file_a', 0, 'alpha beta', 2, '{{}}', {embedding})"
    )
    await database.migrate("head", False)
    assert await database.query("SELECT chunk_id, version FROM chunks") == [("c_old", 0)]
    assert await database.query("SELECT version, removals_from FROM vector_stores") == [(7, 0)]
    store = database.store()
    await store.open()
    try:
        whole = await changes(store, "vs_old", None)
        assert [(e.chunk_id, e.version, e.text, e.embedding) for e in whole.added] == [
            ("c_old", 0, "alpha beta", vec(1, 0, 0))
        ]
        # An index that held the store's version before the upgrade held its chunks: nothing is new to it.
        assert await changes(store, "vs_old", 7) == ChunkChanges(7, False, [], [])
        await store.add_chunks("vs_old", [chunk("c_new", "gamma", vector_store_id="vs_old")])
        found = await changes(store, "vs_old", 7)
        assert (found.complete, [e.chunk_id for e in found.added]) == (False, ["c_new"])
        assert [hit.chunk.chunk_id for hit in await store.keyword_search("vs_old", "beta", None, 5)] == ["c_old"]
    finally:
        await store.close()
    await database.migrate("0017_vector_indexes", True)
    assert "chunk_removals" not in await database.tables()
    assert await database.query("SELECT chunk_id FROM chunks ORDER BY chunk_id") == [("c_new",), ("c_old",)]
    with pytest.raises(Exception, match="removals_from"):
        await database.query("SELECT removals_from FROM vector_stores")
    if database.dialect == "sqlite":  # chunks altered in place: the triggers keeping FTS5 in step are still there
        await database.query("DELETE FROM chunks WHERE chunk_id = 'c_old'")
        assert await database.query("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'beta'") == []


# -- the migration (0019) -------------------------------------------------------------------------------------------


async def _has_fulltext(db: Database) -> bool:
    if db.dialect == "sqlite":
        return "chunks_fts" in await db.tables()
    found = await db.query(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'chunks' AND column_name = 'text_search' "
        "AND table_schema = current_schema()"
    )
    return bool(found[0][0])


async def test_the_full_text_index_goes_and_a_downgrade_makes_it_again_from_the_chunks(
    database: Database,  # noqa: F811 (the fixture imported above)
) -> None:
    await database.migrate("head", False)
    assert not await _has_fulltext(database)
    store = database.store()
    await store.open()
    try:
        await store.create_vector_store(a_store(), [])
        await store.add_chunks("vs_1", [chunk("c_1", "alpha beta"), chunk("c_2", "gamma")])
        assert [hit.chunk.chunk_id for hit in await store.keyword_search("vs_1", "beta", None, 5)] == ["c_1"]
    finally:
        await store.close()
    await database.migrate("0018_chunk_feed", True)
    assert await _has_fulltext(database)
    if database.dialect == "sqlite":
        found = (
            "SELECT c.chunk_id FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH 'beta'"
        )
    else:
        found = "SELECT chunk_id FROM chunks WHERE text_search @@ to_tsquery('english', 'beta')"
    assert await database.query(found) == [("c_1",)]
