"""PostgreSQL: a caller's page among many records of others reads about the page, even under a generic plan.

asyncpg prepares every statement, and after a few runs PostgreSQL may plan it once for any parameters (its
generic plan), guessing that one owner's term holds a share of every record. Driven from a btree on
``record_terms.seq`` or merged with every record in creation order, that plan read everyone else's records up
to the caller's oldest: a page cost what others owned. The page is planned here as a generic plan and run
under ``EXPLAIN ANALYZE``: no step of it may read more rows than a few pages' worth.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pg_plans import generic_plan, most_rows_read
from storage_backends import postgres_store

import ferryman.storage.sql.postgres as pg
from ferryman.storage.domain.files import files
from ferryman.storage.domain.kinds import FILE
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import Owner, owner_terms
from ferryman.storage.knowledge import FileRecord

pytestmark = pytest.mark.anyio

ME, OTHER = Owner("api_key", "me"), Owner("api_key", "other")
OTHERS = 3000


def _file(n: int) -> FileRecord:
    return FileRecord(f"file-{n:06d}", "notes.txt", "assistants", 11, 1_700_000_000, "text/plain")


@pytest.mark.parametrize("mine_first", [True, False], ids=["mine-oldest", "mine-newest"])
@pytest.mark.parametrize("desc", [True, False], ids=["desc", "asc"])
async def test_a_term_page_reads_about_the_page_under_a_generic_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mine_first: bool, desc: bool
) -> None:
    async with postgres_store(tmp_path) as store:
        mine = [files(store.kernel).put(_file(n), owner=ME) for n in range(20)]
        others = [files(store.kernel).put(_file(n), owner=OTHER) for n in range(20, 20 + OTHERS)]
        puts = mine + others if mine_first else others + mine
        for start in range(0, len(puts), 500):
            await store.kernel.write(puts[start : start + 500])
        await store._db.write(pg.Query("ANALYZE", {}, "all"))  # type: ignore[attr-defined]
        plans: list[str] = []
        execute = pg._execute

        async def explained(conn: Any, query: Any) -> Any:
            if "FROM record_terms" in query.sql:
                plans.append(await generic_plan(conn, query))
            return await execute(conn, query)

        monkeypatch.setattr(pg, "_execute", explained)
        allow = Terms(frozenset(owner_terms(ME)))
        (page,) = await store.kernel.read([ops.Page(FILE, allow=allow, limit=10, desc=desc)])
        (rest,) = await store.kernel.read([ops.Page(FILE, allow=allow, limit=10, desc=desc, after=page.items[-1].id)])
    assert len(page.items) == 10 and len(rest.items) == 10 and not rest.has_more
    assert len(plans) == 2, plans
    for plan in plans:
        read = most_rows_read(plan)
        assert read <= 50, f"a step read {read} rows for a page of 10:\n{plan}"
