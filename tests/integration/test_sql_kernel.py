"""The SQL kernel's own promises, beyond the contract suite: its migration builds what ``tables.py`` describes,
and a page filtered by owner is answered from the terms index, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from kernel_backends import BACKENDS
from storage_backends import POSTGRES_URL, postgres_store

from ferryman.storage.kernel.filters import Filter, IdIn, Or, Terms
from ferryman.storage.kernel.model import Kind, Owner, Schema
from ferryman.storage.kernel.ops import Page, Put
from ferryman.storage.sql import kernel_statements as st
from ferryman.storage.sql.dialects import Compiled
from ferryman.storage.sql.kernel import SqlKernel
from ferryman.storage.sql.kernel_reads import run
from ferryman.storage.sql.migrate import postgres_engine, sqlite_engine
from ferryman.storage.sql.seam import Query
from ferryman.storage.sql.tables import KERNEL_TABLES, metadata
from inprocess import migrated_sqlite

pytestmark = pytest.mark.anyio

AGENT = Kind("agent")
SCHEMA = Schema([AGENT])
MINE, THEIRS = Owner("api_key", "me"), Owner("api_key", "them")
OTHERS = 5000
KERNEL_NAMES = {table.name for table in KERNEL_TABLES}


def _kernel_only(name: str | None, type_: str, _parents: Any) -> bool:
    return type_ != "table" or name in KERNEL_NAMES


def _differences(conn: sa.Connection) -> list[Any]:
    context = MigrationContext.configure(conn, opts={"include_name": _kernel_only, "compare_type": True})
    return list(compare_metadata(context, metadata))


async def test_the_migration_builds_what_tables_describes_on_sqlite(tmp_path: Path) -> None:
    engine = sqlite_engine(migrated_sqlite(tmp_path / "compare.db"))
    try:
        with engine.connect() as conn:
            assert _differences(conn) == []
    finally:
        engine.dispose()


async def test_the_migration_builds_what_tables_describes_on_postgres(tmp_path: Path) -> None:
    async with postgres_store(tmp_path) as store:
        schema: str = store._db._schema  # type: ignore[attr-defined]
    engine = postgres_engine(POSTGRES_URL, schema)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(_differences) == []
    finally:
        await engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
async def crowded(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlKernel]:
    """A kernel holding 30 agents of mine among 5,000 of another owner's.

    PostgreSQL's statistics are brought up to date (autovacuum would); SQLite has none, as a server's file.
    """
    async with BACKENDS[request.param](tmp_path, SCHEMA) as kernel:
        sql = cast(SqlKernel, kernel)
        for start in range(0, OTHERS, 1000):
            await sql.write(
                [Put(AGENT, f"a{n}", {}, owner=MINE if n % 167 == 0 else THEIRS) for n in range(start, start + 1000)]
            )
        if not sql.dialect.is_sqlite:
            await sql.driver.write(Query("ANALYZE", {}, "all"))
        yield sql


async def _plan(kernel: SqlKernel, allow: Filter) -> list[str]:
    """The database's plan for the first page of 21 agents that ``allow`` admits, one line per step.

    SQLite's lines are ``EXPLAIN QUERY PLAN``'s. PostgreSQL's are ``<node> <table> read=<rows>`` from
    ``EXPLAIN ANALYZE``, ``<rows>`` counting the rows the step read, those its filter removed included.
    """
    d = kernel.dialect
    shape, values = st.filter_shape(allow)
    page = st.page(d, st.PageShape(True, None, False, False, False, False, False, shape))
    params = {name: d.array(v) if isinstance(v, frozenset) else v for name, v in values.items()}
    params |= {"kind": "agent", "limit": 22, "offset": 0, "window": 22, "zero": 0}
    if d.is_sqlite:
        rows = await kernel.driver.read(run(Compiled("EXPLAIN QUERY PLAN " + page.sql, page.fixed), "all", **params))
        return [row[3] for row in rows]
    explain = Compiled("EXPLAIN (ANALYZE, FORMAT JSON) " + page.sql, page.fixed)
    rows = await kernel.driver.read(run(explain, "all", **params))
    return [_line(node) for node in _nodes(json.loads(rows[0][0])[0]["Plan"])]


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _line(node: dict[str, Any]) -> str:
    read = node["Actual Rows"] * node["Actual Loops"] + node.get("Rows Removed by Filter", 0)
    return f"{node['Node Type']} {node.get('Relation Name', '-')} read={read}"


def _reads_everything(kernel: SqlKernel, step: str) -> bool:
    """Whether a step of the plan reads the records (or terms) of the kind rather than look up a few."""
    if kernel.dialect.is_sqlite:
        reads = re.match(r"^(SCAN|SEARCH) (records|named|record_terms)\b", step)
        return bool(reads) and not re.search(r"\b(rowid|id|term)=\?", step)
    table, read = re.fullmatch(r".* (\S+) read=(\d+)", step).groups()  # type: ignore[union-attr]
    return table in ("records", "record_terms") and int(read) > OTHERS // 10


@pytest.mark.parametrize(
    "allow",
    [
        Terms(frozenset({"p:key:me"})),
        Terms(frozenset({"p:key:me", "teams:red"})),
        Or((Terms(frozenset({"p:key:me"})), IdIn(frozenset({"a7"})))),
    ],
    ids=["one term", "two terms", "term or ids"],
)
async def test_a_page_filtered_by_owner_never_reads_the_whole_kind(crowded: SqlKernel, allow: Filter) -> None:
    plan = await _plan(crowded, allow)
    assert plan and not [step for step in plan if _reads_everything(crowded, step)], plan
    [page] = await crowded.read([Page(AGENT, parent=None, allow=allow)])
    ids = [f"a{n}" for n in range(0, OTHERS, 167)]
    assert [rec.id for rec in page.items] == (
        ids if "a7" not in str(allow) else sorted([*ids, "a7"], key=lambda i: int(i[1:]))
    )


async def test_a_one_term_page_is_read_in_index_order_without_sorting(crowded: SqlKernel) -> None:
    plan = await _plan(crowded, Terms(frozenset({"p:key:me"})))
    assert not [step for step in plan if "TEMP B-TREE" in step or step.startswith("Sort")], plan
