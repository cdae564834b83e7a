"""Sessions of agents (the agents themselves are kernel records: ``storage.domain.agents``)."""

from __future__ import annotations

from typing import Any

from ferryman.errors import ConflictError, NotFoundError

from ..base import Page, SessionRecord
from ..kernel.model import Owner
from ..rows import page_of
from .owners import stamp_owner
from .seam import NO_LIMIT, Dialect, Driver, UniqueViolation, Work, count, first, rows

_SESSION = "SELECT session_id, agent_id, session_name, started_at FROM sessions"


def insert_session(dialect: Dialect, session: SessionRecord, owner: Owner | None) -> Work[None]:
    """Store a new session and its owner (None: none), in the unit of work that yields from this.

    Raises:
        ConflictError: a session with this id exists.
    """
    try:
        yield count(
            "INSERT INTO sessions (session_id, agent_id, session_name, started_at) "
            "VALUES (:session_id, :agent_id, :name, :started_at)",
            session_id=session.session_id,
            agent_id=session.agent_id,
            name=session.session_name,
            started_at=dialect.stamp(session.started_at),
        )
    except UniqueViolation as exc:
        raise ConflictError(f"session '{session.session_id}' already exists") from exc
    if owner is not None:
        yield from stamp_owner("session", session.session_id, owner)


def _window(start_index: int, limit: int | None) -> dict[str, int]:
    """``LIMIT``/``OFFSET`` arguments fetching one row more than the page."""
    return {"limit": NO_LIMIT if limit is None else limit + 1, "offset": start_index}


class SessionTables:
    """Sessions, over a :class:`Driver` (no foreign key to an agent: the service checks the agent exists)."""

    _db: Driver

    # ---- sessions --------------------------------------------------------

    async def create_session(self, session: SessionRecord, owner: Owner | None = None) -> None:
        """Store a new session (with its owner).

        Raises:
            ConflictError: a session with this id exists.
        """
        await self._db.write(insert_session(self._db.dialect, session, owner))

    def _session(self, row: Any) -> SessionRecord:
        started_at = self._db.dialect.read_stamp(row[3])
        if started_at is None:
            raise ValueError(f"session {row[0]} has no start time")
        return SessionRecord(row[0], row[1], row[2], started_at)

    async def get_session(self, agent_id: str, session_id: str) -> SessionRecord:
        """Return a session of an agent or raise NotFoundError."""
        row = await self._db.read(
            first(
                f"{_SESSION} WHERE session_id = :session_id AND agent_id = :agent_id",  # noqa: S608
                session_id=session_id,
                agent_id=agent_id,
            )
        )
        if row is None:
            raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found")
        return self._session(row)

    async def list_sessions(self, agent_id: str, start_index: int, limit: int | None) -> Page[SessionRecord]:
        """Return an agent's sessions in creation order."""
        found = await self._db.read(
            rows(
                f"{_SESSION} WHERE agent_id = :agent_id ORDER BY id LIMIT :limit OFFSET :offset",  # noqa: S608
                agent_id=agent_id,
                **_window(start_index, limit),
            )
        )
        page, more = page_of(found, limit)
        return Page([self._session(r) for r in page], more)

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session and, by cascade, its turns."""
        deleted = await self._db.write(
            count(
                "DELETE FROM sessions WHERE session_id = :session_id AND agent_id = :agent_id",
                session_id=session_id,
                agent_id=agent_id,
            )
        )
        if not deleted:
            raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found")
