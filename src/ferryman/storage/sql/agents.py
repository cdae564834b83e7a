"""Sessions' anchors: the ``sessions`` row a session's turns hang from, written with its kernel record.

A session's own fields and owner are its ``session`` record (``storage.domain.agents``); the row keeps what
its turns' statements join and lock (its agent, the turn it runs, its history's epoch).
"""

from __future__ import annotations

import sqlalchemy as sa

from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.base import KeySettlement, SessionRecord
from ferryman.storage.domain.agents import sessions
from ferryman.storage.domain.kinds import SESSION
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import sessions as anchors
from ferryman.storage.sql.idempotency import claimed, settled
from ferryman.storage.sql.kernel import SqlKernel
from ferryman.storage.sql.seam import Driver, UniqueViolation, Work, count

A = anchors.c


def _delete(d: SqlDialect, *, of_agent: bool) -> Compiled:
    """Delete session ``:session_id``'s anchor (``of_agent``: only if it is agent ``:agent_id``'s)."""

    def build() -> sa.Delete:
        where = A.session_id == p("session_id")
        return sa.delete(anchors).where(sa.and_(where, A.agent_id == p("agent_id")) if of_agent else where)

    return d.compiled(("agents.delete_session", of_agent), build)


def insert_session(kernel: SqlKernel, session: SessionRecord, owner: Owner | None) -> Work[None]:
    """Store a new session's record (with its owner, None: none) and its anchor, in the unit of work that yields
    from this.

    Raises:
        ConflictError: a session with this id exists.
    """
    yield from kernel.writes_within([sessions(kernel).put(session, owner=owner)])
    try:
        yield count(
            "INSERT INTO sessions (session_id, agent_id) VALUES (:session_id, :agent_id)",
            session_id=session.session_id,
            agent_id=session.agent_id,
        )
    except UniqueViolation as exc:  # an anchor no record names: only a crash of an older version leaves one
        raise ConflictError(f"session '{session.session_id}' already exists") from exc


def remove_session(kernel: SqlKernel, session_id: str, agent_id: str | None = None) -> Work[bool]:
    """Delete a session's anchor (its turns go by cascade) and its record, in the unit of work that yields
    from this; whether it was there (of ``agent_id``, when given: else nothing is deleted)."""
    statement = _delete(kernel.dialect, of_agent=agent_id is not None)
    deleted = yield statement.count(session_id=session_id, agent_id=agent_id)
    if deleted:
        yield from kernel.writes_within([ops.Delete(SESSION, session_id)])
    return bool(deleted)


class SessionTables:
    """Sessions' anchors, over a :class:`Driver` (no foreign key to an agent: the service checks the agent)."""

    _db: Driver
    kernel: SqlKernel

    async def create_session(
        self, session: SessionRecord, owner: Owner | None = None, settle: KeySettlement | None = None
    ) -> None:
        """Store a new session's record (with its owner), its anchor and ``settle``'s key outcome, in one
        transaction.

        Raises:
            ConflictError: a session with this id exists.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        d = self._db.dialect

        def work() -> Work[None]:
            yield from claimed(d, settle)  # first: a repeat finds the key held and writes nothing
            yield from insert_session(self.kernel, session, owner)
            yield from settled(d, settle)

        await self._db.write(work())

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session of an agent, its record and, by cascade, its turns, in one transaction.

        Raises:
            NotFoundError: the agent has no such session.
        """
        if not await self._db.write(remove_session(self.kernel, session_id, agent_id)):
            raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found")
