"""Sessions' anchors: the ``sessions`` row a session's turns hang from, written with its kernel record.

A session's own fields and owner are its ``session`` record (``storage.domain.agents``); the row keeps what
its turns' statements join and lock (its agent, the turn it runs, its history's epoch).
"""

from __future__ import annotations

from ferryman.errors import ConflictError, NotFoundError

from ..base import KeySettlement, SessionRecord
from ..domain.agents import sessions
from ..domain.kinds import SESSION
from ..kernel import ops
from ..kernel.model import Owner
from .idempotency import claimed, settled
from .kernel import SqlKernel
from .seam import Driver, UniqueViolation, Work, count


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
    of_agent = "" if agent_id is None else " AND agent_id = :agent_id"
    deleted = yield count(
        f"DELETE FROM sessions WHERE session_id = :session_id{of_agent}",  # noqa: S608
        session_id=session_id,
        agent_id=agent_id,
    )
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
