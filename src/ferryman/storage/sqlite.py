"""The SQLite backend: the default, no set-up."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ferryman.api.agents import Agent
from ferryman.api.registry import Model
from ferryman.errors import NotFoundError

from . import codec
from .base import Page, SessionRecord
from .migrate import migrate_sqlite
from .rows import page_of
from .sqlite_conn import SqliteRunner
from .sqlite_idempotency import IdempotencyTables
from .sqlite_responses import ResponseTables
from .sqlite_turns import TurnTables


def _window(start_index: int, limit: int | None) -> tuple[int, int]:
    """``LIMIT ? OFFSET ?`` arguments fetching one row more than the page (-1: no limit)."""
    return (-1 if limit is None else limit + 1), start_index


class SqliteStore(TurnTables, ResponseTables, IdempotencyTables):
    """Agents, sessions, turns, steps and history in one SQLite file.

    Args:
        path: Path of the database file (``:memory:`` is not supported: readers
            and the writer need to share a file).
    """

    def __init__(self, path: str) -> None:
        self._db = SqliteRunner(path)
        self._messages = codec.MessageCache()

    async def open(self) -> None:
        """Create the file if needed and apply migrations."""
        self._db.prepare()
        await self._db.raw(migrate_sqlite)

    async def close(self) -> None:
        """Close the connections."""
        self._db.close()

    # ---- agents ----------------------------------------------------------

    async def create_agent(self, agent: Agent) -> None:
        """Store a new agent."""
        row = (agent.agent_id, agent.agent_config.model_dump_json(), codec.dump_time(agent.created_at))
        await self._db.write(
            lambda c: c.execute("INSERT INTO agents (agent_id, config, created_at) VALUES (?, ?, ?)", row)
        )

    async def get_agent(self, agent_id: str) -> Agent:
        """Return an agent or raise NotFoundError."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT agent_id, config, created_at FROM agents WHERE agent_id = ?", (agent_id,)
            ).fetchone()
        )
        if row is None:
            raise NotFoundError(f"agent '{agent_id}' not found")
        return self._agent(row)

    @staticmethod
    def _agent(row: tuple[str, str, str]) -> Agent:
        return Agent(agent_id=row[0], agent_config=codec.load_config(row[1]), created_at=codec.require_time(row[2]))

    async def list_agents(self, start_index: int, limit: int | None) -> Page[Agent]:
        """Return agents in creation order."""
        sql = "SELECT agent_id, config, created_at FROM agents ORDER BY id LIMIT ? OFFSET ?"
        rows = await self._db.read(lambda c: c.execute(sql, _window(start_index, limit)).fetchall())
        page, more = page_of(rows, limit)
        return Page([self._agent(row) for row in page], more)

    async def delete_agent(self, agent_id: str) -> None:
        """Delete an agent and, by cascade, everything under it."""
        deleted = await self._db.write(
            lambda c: c.execute("DELETE FROM agents WHERE agent_id = ?", (agent_id,)).rowcount
        )
        if not deleted:
            raise NotFoundError(f"agent '{agent_id}' not found")

    # ---- models ----------------------------------------------------------

    async def save_model(self, model: Model) -> None:
        """Store (or replace) a registered model."""
        row = (
            model.identifier,
            model.provider_id,
            model.provider_resource_id,
            model.model_type,
            json.dumps(model.metadata),
            codec.dump_time(datetime.now(UTC)),
        )
        await self._db.write(
            lambda c: c.execute(
                "INSERT INTO models (model_id, provider_id, provider_resource_id, model_type, metadata, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(model_id) DO UPDATE SET provider_id = excluded.provider_id, "
                "provider_resource_id = excluded.provider_resource_id, model_type = excluded.model_type, "
                "metadata = excluded.metadata",
                row,
            )
        )

    async def delete_model(self, model_id: str) -> bool:
        """Forget a registered model."""
        deleted: int = await self._db.write(
            lambda c: c.execute("DELETE FROM models WHERE model_id = ?", (model_id,)).rowcount
        )
        return deleted > 0

    async def registered_models(self) -> list[Model]:
        """Every registered model, in registration order."""
        rows = await self._db.read(
            lambda c: c.execute(
                "SELECT model_id, provider_id, provider_resource_id, model_type, metadata FROM models ORDER BY id"
            ).fetchall()
        )
        return [
            Model(
                identifier=r[0], provider_id=r[1], provider_resource_id=r[2], model_type=r[3], metadata=json.loads(r[4])
            )
            for r in rows
        ]

    # ---- sessions --------------------------------------------------------

    async def create_session(self, session: SessionRecord) -> None:
        """Store a new session."""
        row = (session.session_id, session.agent_id, session.session_name, codec.dump_time(session.started_at))
        await self._db.write(
            lambda c: c.execute(
                "INSERT INTO sessions (session_id, agent_id, session_name, started_at) VALUES (?, ?, ?, ?)",
                row,
            )
        )

    async def get_session(self, agent_id: str, session_id: str) -> SessionRecord:
        """Return a session of an agent or raise NotFoundError."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT session_id, agent_id, session_name, started_at FROM sessions "
                "WHERE session_id = ? AND agent_id = ?",
                (session_id, agent_id),
            ).fetchone()
        )
        if row is None:
            raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found")
        return SessionRecord(row[0], row[1], row[2], codec.require_time(row[3]))

    async def list_sessions(self, agent_id: str, start_index: int, limit: int | None) -> Page[SessionRecord]:
        """Return an agent's sessions in creation order."""
        sql = (
            "SELECT session_id, agent_id, session_name, started_at FROM sessions "
            "WHERE agent_id = ? ORDER BY id LIMIT ? OFFSET ?"
        )
        rows = await self._db.read(lambda c: c.execute(sql, (agent_id, *_window(start_index, limit))).fetchall())
        page, more = page_of(rows, limit)
        return Page([SessionRecord(r[0], r[1], r[2], codec.require_time(r[3])) for r in page], more)

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session and, by cascade, its turns."""
        deleted = await self._db.write(
            lambda c: (
                c.execute("DELETE FROM sessions WHERE session_id = ? AND agent_id = ?", (session_id, agent_id)).rowcount
            )
        )
        if not deleted:
            raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found")
