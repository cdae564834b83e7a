"""The SQL store: every record kind's tables, over one driver.

A new kind of record is one more module beside these (its statements, written
once with named parameters, as a mixin over ``self._db``), one more base class
here, and one Alembic revision under ``migrations/versions``.
"""

from __future__ import annotations

from ferryman.storage import codec
from ferryman.storage.derived_reads import DerivedReads
from ferryman.storage.domain.conversations import ConversationDeletes
from ferryman.storage.domain.items import ItemRecords
from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.domain.responses import ResponseEvents
from ferryman.storage.search.chunk_search import InProcessSearch
from ferryman.storage.sql.agents import SessionTables
from ferryman.storage.sql.chunks import ChunkTables
from ferryman.storage.sql.files import FileTables
from ferryman.storage.sql.history import SqlHistories
from ferryman.storage.sql.idempotency import IdempotencyTables
from ferryman.storage.sql.ingestion import IngestionTables
from ferryman.storage.sql.kernel import SqlKernel
from ferryman.storage.sql.responses import ResponseTables
from ferryman.storage.sql.resumes import ResumeTables
from ferryman.storage.sql.seam import Driver
from ferryman.storage.sql.turns import TurnTables
from ferryman.storage.sql.vector_stores import VectorStoreTables


class SqlStore(
    SessionTables,
    TurnTables,
    ResumeTables,
    ResponseTables,
    IdempotencyTables,
    FileTables,
    VectorStoreTables,
    IngestionTables,
    ChunkTables,
    DerivedReads,
    ItemRecords,
    ResponseEvents,
    ConversationDeletes,
):
    """Sessions, turns, responses, idempotency keys and knowledge in SQL (the rest, agents included: ``kernel``).

    Args:
        driver: The database's driver (SQLite or PostgreSQL), not yet open.
    """

    def __init__(self, driver: Driver) -> None:
        self._db = driver
        self.kernel = SqlKernel(driver, SCHEMA)
        """The storage kernel on the same database (the kinds moved onto it: :mod:`ferryman.storage.domain`)."""
        self._messages = codec.MessageCache()
        self._histories = SqlHistories(self._messages)
        self._search = InProcessSearch(self.chunk_changes, self._chunks_by_id)

    async def open(self) -> None:
        """Connect and bring the schema up to date."""
        await self._db.open()

    async def close(self) -> None:
        """Release the connections."""
        await self._db.close()
