"""Agents and their sessions."""

from __future__ import annotations

from typing import Any

from ferryman.api.agents import Agent
from ferryman.errors import NotFoundError

from .. import codec
from ..base import Page, SessionRecord
from ..rows import page_of
from .seam import NO_LIMIT, Driver, count, first, rows

_SESSION = "SELECT session_id, agent_id, session_name, started_at FROM sessions"


def _window(start_index: int, limit: int | None) -> dict[str, int]:
    """``LIMIT``/``OFFSET`` arguments fetching one row more than the page."""
    return {"limit": NO_LIMIT if limit is None else limit + 1, "offset": start_index}


class AgentTables:
    """Agents and sessions, over a :class:`Driver`."""

    _db: Driver

    # ---- agents ----------------------------------------------------------

    async def create_agent(self, agent: Agent) -> None:
        """Store a new agent."""
        await self._db.write(
            count(
                "INSERT INTO agents (agent_id, config, created_at) VALUES (:agent_id, :config, :created_at)",
                agent_id=agent.agent_id,
                config=agent.agent_config.model_dump_json(),
                created_at=self._db.dialect.stamp(agent.created_at),
            )
        )

    async def get_agent(self, agent_id: str) -> Agent:
        """Return an agent or raise NotFoundError."""
        row = await self._db.read(
            first("SELECT agent_id, config, created_at FROM agents WHERE agent_id = :agent_id", agent_id=agent_id)
        )
        if row is None:
            raise NotFoundError(f"agent '{agent_id}' not found")
        return self._agent(row)

    def _agent(self, row: Any) -> Agent:
        created_at = self._db.dialect.read_stamp(row[2])
        if created_at is None:
            raise ValueError(f"agent {row[0]} has no creation time")
        return Agent(agent_id=row[0], agent_config=codec.load_config(row[1]), created_at=created_at)

    async def list_agents(self, start_index: int, limit: int | None) -> Page[Agent]:
        """Return agents in creation order."""
        found = await self._db.read(
            rows(
                "SELECT agent_id, config, created_at FROM agents ORDER BY id LIMIT :limit OFFSET :offset",
                **_window(start_index, limit),
            )
        )
        page, more = page_of(found, limit)
        return Page([self._agent(row) for row in page], more)

    async def delete_agent(self, agent_id: str) -> None:
        """Delete an agent and, by cascade, everything under it."""
        if not await self._db.write(count("DELETE FROM agents WHERE agent_id = :agent_id", agent_id=agent_id)):
            raise NotFoundError(f"agent '{agent_id}' not found")

    # ---- sessions --------------------------------------------------------

    async def create_session(self, session: SessionRecord) -> None:
        """Store a new session."""
        await self._db.write(
            count(
                "INSERT INTO sessions (session_id, agent_id, session_name, started_at) "
                "VALUES (:session_id, :agent_id, :name, :started_at)",
                session_id=session.session_id,
                agent_id=session.agent_id,
                name=session.session_name,
                started_at=self._db.dialect.stamp(session.started_at),
            )
        )

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
