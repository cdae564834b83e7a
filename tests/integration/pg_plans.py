"""Running one of the store's statements as PostgreSQL's generic plan, under ``EXPLAIN ANALYZE``.

asyncpg prepares every statement, and after a few runs PostgreSQL may plan it once for any parameters (its
generic plan). A test captures a statement as the store runs it, plans it so, and reads how many rows each step
of the plan read (:func:`most_rows_read`).
"""

from __future__ import annotations

import re
from typing import Any

import ferryman.storage.sql.postgres as pg

_ROWS = re.compile(r"actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)")


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "ARRAY[" + ", ".join(_literal(item) for item in value) + "]::text[]"
    return "'" + str(value).replace("'", "''") + "'"


async def generic_plan(conn: Any, query: Any) -> str:
    """The statement's plan for any parameters (as a prepared statement may be run), run with this query's."""
    sql, names = pg._positional(query.sql)
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    try:
        await conn.execute(f"PREPARE planned AS {sql}")
        values = ", ".join(_literal(query.params[name]) for name in names)
        found = await conn.fetch(f"EXPLAIN ANALYZE EXECUTE planned({values})")
    finally:
        await conn.execute("DEALLOCATE planned; RESET plan_cache_mode")
    return "\n".join(row[0] for row in found)


def most_rows_read(plan: str) -> int:
    """The most rows any one step of an ``EXPLAIN ANALYZE`` plan read, over all its loops."""
    return max(int(rows) * int(loops) for rows, loops in _ROWS.findall(plan))


def _values(compiled: Any, params: dict[str, Any]) -> tuple[str, str]:
    sql, names = pg._positional(compiled.sql)
    bound = compiled.params(params)
    return sql, ", ".join(_literal(bound[name]) for name in names)


async def plan_now(conn: Any, name: str, compiled: Any, params: dict[str, Any]) -> None:
    """Prepare a compiled statement as ``name`` and run it once with ``params``, so that PostgreSQL plans it for any
    parameters now and keeps that plan (as a replica's prepared statement does while its tables grow)."""
    sql, values = _values(compiled, params)
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    await conn.execute(f"PREPARE {name} AS {sql}")
    await conn.fetch(f"EXECUTE {name}({values})")


async def kept_plan(conn: Any, name: str, compiled: Any, params: dict[str, Any]) -> str:
    """The plan :func:`plan_now` kept for ``name``, run with ``params`` under ``EXPLAIN ANALYZE``."""
    _, values = _values(compiled, params)
    found = await conn.fetch(f"EXPLAIN ANALYZE EXECUTE {name}({values})")
    return "\n".join(row[0] for row in found)
