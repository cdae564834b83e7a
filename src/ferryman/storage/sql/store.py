"""The SQL store: every record kind's tables, over one driver.

A new kind of record is one more module beside these (its statements, written
once with named parameters, as a mixin over ``self._db``), one more base class
here, and one Alembic revision under ``migrations/versions``.
"""

from __future__ import annotations

from .. import codec
from ..chunk_search import InProcessSearch
from ..domain.kinds import SCHEMA
from .agents import SessionTables
from .chunks import ChunkTables
from .files import FileTables
from .history import SqlHistories
from .idempotency import IdempotencyTables
from .ingestion import IngestionTables
from .kernel import SqlKernel
from .responses import ResponseTables
from .resumes import ResumeTables
from .seam import Driver
from .turns import TurnTables
from .vector_stores import VectorStoreTables


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
