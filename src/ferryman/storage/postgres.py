"""The PostgreSQL backend: one schema shared by any number of replicas."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import asyncpg

from ferryman.api.agents import Agent
from ferryman.api.registry import Model
from ferryman.errors import InvalidRequestError, NotFoundError

from . import codec
from .base import Page, SessionRecord
from .migrate import migration_scripts
from .postgres_idempotency import PgIdempotencyTables
from .postgres_responses import PgResponseTables
from .postgres_turns import PgTurnTables
from .rows import page_of

# Every replica migrates at start-up; this advisory lock makes them take turns.
_MIGRATION_LOCK = 0x66657272  # "ferr"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class PostgresStore(PgTurnTables, PgResponseTables, PgIdempotencyTables):
    """Agents, sessions, turns, responses and models in PostgreSQL, over an asyncpg pool.

    Args:
        url: A ``postgresql://`` URL.
        schema: The schema to use (created if missing); default: the server's search path.
        pool_size: Most connections the pool opens.
    """

    def __init__(self, url: str, schema: str | None = None, pool_size: int = 10) -> None:
        if schema is not None and not _SCHEMA_NAME.match(schema):
            raise InvalidRequestError(f"invalid schema name {schema!r}")
        self._url = url
        self._schema = schema
        self._pool_size = pool_size
        self._pool_or_none: asyncpg.Pool | None = None
        self._messages = codec.MessageCache()

    @property
    def _pool(self) -> asyncpg.Pool:
        if self._pool_or_none is None:
            raise RuntimeError("the store is not open")
        return self._pool_or_none

    async def open(self) -> None:
        """Connect, create the schema if asked, and apply pending migrations."""
        settings = {"search_path": self._schema} if self._schema else {}
        if self._schema:
            connection = await asyncpg.connect(self._url)
            try:
                await connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{self._schema}"')
            finally:
                await connection.close()
        self._pool_or_none = await asyncpg.create_pool(
            self._url, min_size=1, max_size=self._pool_size, server_settings=settings
        )
        await self._migrate()

    async def _migrate(self) -> None:
        async with self._pool.acquire() as c, c.transaction():
            await c.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await c.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
            )
            applied = {row[0] for row in await c.fetch("SELECT version FROM schema_migrations")}
            for version, name, sql in migration_scripts("postgres"):
                if version in applied:
                    continue
                await c.execute(sql)
                await c.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                    version,
                    name,
                    datetime.now(UTC),
                )

    async def close(self) -> None:
        """Close the pool."""
        if self._pool_or_none is not None:
            await self._pool_or_none.close()
            self._pool_or_none = None

    # ---- agents ----------------------------------------------------------

    async def create_agent(self, agent: Agent) -> None:
        """Store a new agent."""
        await self._pool.execute(
            "INSERT INTO agents (agent_id, config, created_at) VALUES ($1, $2, $3)",
            agent.agent_id,
            agent.agent_config.model_dump_json(),
            agent.created_at,
        )

    async def get_agent(self, agent_id: str) -> Agent:
        """Return an agent or raise NotFoundError."""
        row = await self._pool.fetchrow("SELECT agent_id, config, created_at FROM agents WHERE agent_id = $1", agent_id)
        if row is None:
            raise NotFoundError(f"agent '{agent_id}' not found")
        return _agent(row)

    async def list_agents(self, start_index: int, limit: int | None) -> Page[Agent]:
        """Return agents in creation order."""
        rows = await self._pool.fetch(
            "SELECT agent_id, config, created_at FROM agents ORDER BY id LIMIT $1 OFFSET $2",
            None if limit is None else limit + 1,
            start_index,
        )
        page, more = page_of(list(rows), limit)
        return Page([_agent(row) for row in page], more)

    async def delete_agent(self, agent_id: str) -> None:
        """Delete an agent and, by cascade, everything under it."""
        status = await self._pool.execute("DELETE FROM agents WHERE agent_id = $1", agent_id)
        if status.endswith(" 0"):
            raise NotFoundError(f"agent '{agent_id}' not found")

    # ---- models ----------------------------------------------------------

    async def save_model(self, model: Model) -> None:
        """Store (or replace) a registered model."""
        await self._pool.execute(
            "INSERT INTO models (model_id, provider_id, provider_resource_id, model_type, metadata, created_at) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (model_id) DO UPDATE SET provider_id = excluded.provider_id, "
            "provider_resource_id = excluded.provider_resource_id, model_type = excluded.model_type, "
            "metadata = excluded.metadata",
            model.identifier,
            model.provider_id,
            model.provider_resource_id,
            model.model_type,
            json.dumps(model.metadata),
            datetime.now(UTC),
        )

    async def delete_model(self, model_id: str) -> bool:
        """Forget a registered model."""
        status = await self._pool.execute("DELETE FROM models WHERE model_id = $1", model_id)
        return not status.endswith(" 0")

    async def registered_models(self) -> list[Model]:
        """Every registered model, in registration order."""
        rows = await self._pool.fetch(
            "SELECT model_id, provider_id, provider_resource_id, model_type, metadata FROM models ORDER BY id"
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
        await self._pool.execute(
            "INSERT INTO sessions (session_id, agent_id, session_name, started_at) VALUES ($1, $2, $3, $4)",
            session.session_id,
            session.agent_id,
            session.session_name,
            session.started_at,
        )

    async def get_session(self, agent_id: str, session_id: str) -> SessionRecord:
        """Return a session of an agent or raise NotFoundError."""
        row = await self._pool.fetchrow(
            "SELECT session_id, agent_id, session_name, started_at FROM sessions "
            "WHERE session_id = $1 AND agent_id = $2",
            session_id,
            agent_id,
        )
        if row is None:
            raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found")
        return SessionRecord(row[0], row[1], row[2], row[3])

    async def list_sessions(self, agent_id: str, start_index: int, limit: int | None) -> Page[SessionRecord]:
        """Return an agent's sessions in creation order."""
        rows = await self._pool.fetch(
            "SELECT session_id, agent_id, session_name, started_at FROM sessions WHERE agent_id = $1 "
            "ORDER BY id LIMIT $2 OFFSET $3",
            agent_id,
            None if limit is None else limit + 1,
            start_index,
        )
        page, more = page_of(list(rows), limit)
        return Page([SessionRecord(r[0], r[1], r[2], r[3]) for r in page], more)

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session and, by cascade, its turns."""
        status = await self._pool.execute(
            "DELETE FROM sessions WHERE session_id = $1 AND agent_id = $2", session_id, agent_id
        )
        if status.endswith(" 0"):
            raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found")


def _agent(row: Any) -> Agent:
    return Agent(agent_id=row[0], agent_config=codec.load_config(row[1]), created_at=row[2])
