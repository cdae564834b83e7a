"""PostgreSQL: one record's log, and a new record's parent, are read about themselves under a plan kept from small.

asyncpg prepares every statement, and PostgreSQL may plan it once for any parameters and keep that plan as its
tables grow. Planned while the tables were small, a log read that joined the log to its record walked every
record's log: a response's replay came to cost what the whole database held (19 ms after 300 responses in one
conversation, from 0.5; 4,001 rows read here). A new record's parent lookup, which every item's write makes, is
held to the same. Each statement is planned here on a nearly empty schema, the schema then grows to thousands of
records, and the kept plan is run for the newest under ``EXPLAIN ANALYZE`` (``pg_plans``): no step of it may read
more than a few rows.
"""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest
from pg_plans import kept_plan, most_rows_read, plan_now
from storage_backends import CONNECT_TIMEOUT, POSTGRES_URL, postgres_store

from ferryman.storage.domain.kinds import ITEM, RESPONSE
from ferryman.storage.domain.responses import EVENTS, events_written
from ferryman.storage.kernel import ops
from ferryman.storage.sql import kernel_statements as st

pytestmark = pytest.mark.anyio

OTHERS = 2000


async def test_a_log_read_and_a_parent_lookup_read_about_their_record_under_a_plan_kept_from_small(
    tmp_path: Path,
) -> None:
    async with postgres_store(tmp_path) as store:
        kernel = store.kernel
        dialect = kernel.dialect  # type: ignore[attr-defined]
        conn = await asyncpg.connect(POSTGRES_URL, timeout=CONNECT_TIMEOUT)
        try:
            await conn.execute(f'SET search_path TO "{store._db._schema}"')  # type: ignore[attr-defined]

            def log_read(response_id: str) -> dict[str, object]:
                return {"kind": RESPONSE.name, "id": response_id, "channel": EVENTS, "after": -1, "limit": 100}

            def parent(response_id: str) -> dict[str, object]:
                return {"parent": response_id, "kinds": list(ITEM.parents)}

            await kernel.write([ops.Put(RESPONSE, "resp_first", {}), events_written("resp_first", ["a"])])
            await plan_now(conn, "log_read", st.events(dialect), log_read("resp_first"))
            await plan_now(conn, "parent", st.find_parent(dialect), parent("resp_first"))
            ids = [f"resp_{n:05d}" for n in range(OTHERS)]  # the last, the newest, is the one read
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                puts = [ops.Put(RESPONSE, response_id, {}) for response_id in chunk]
                await kernel.write([*puts, *(events_written(response_id, ["a", "b"]) for response_id in chunk)])
            plans = {
                "log read": await kept_plan(conn, "log_read", st.events(dialect), log_read(ids[-1])),
                "parent lookup": await kept_plan(conn, "parent", st.find_parent(dialect), parent(ids[-1])),
            }
        finally:
            await conn.close()
    for name, plan in plans.items():
        read = most_rows_read(plan)
        assert read <= 10, f"the {name} read {read} rows:\n{plan}"
