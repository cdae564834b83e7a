"""The Redis backend: records in Redis structures, shared by any number of replicas.

Each record is a hash; each list (an agent's sessions, a session's
turns, responses, an owner's items) is a sorted set scored
by one ``INCR`` counter, so creation order is exact and a page is a range by
rank or by score, never a scan. Key layout: :mod:`ferryman.storage.redis_keys`.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from ferryman.errors import NotFoundError
from ferryman.redis_url import DEFAULT_PREFIX, connect

from . import codec
from .base import SessionRecord
from .chunk_search import InProcessSearch
from .domain.kinds import SCHEMA
from .history_cache import Histories
from .kernel.model import Owner
from .owners import dump_owner
from .page import Page
from .redis.kernel import RedisKernel
from .redis_chunks import RedisChunks
from .redis_idempotency import RedisIdempotency
from .redis_keys import AGENT_SESSIONS, SESSION, Keys
from .redis_owners import RedisOwners
from .redis_records import SESSION_FIELDS, session_of
from .redis_responses import RedisResponses
from .redis_script import Scripts
from .redis_scripts import CREATE_SESSION, DELETE_SESSION, LIBRARY, CreateSession, SessionOfAgent
from .redis_turns import RedisTurns
from .redis_upgrade import upgrade
from .rows import page_of


class RedisStore(
    RedisTurns,
    RedisResponses,
    RedisChunks,
    RedisIdempotency,
    RedisOwners,
):
    """Sessions, turns, responses and knowledge in one Redis database (the rest, agents included: ``kernel``).

    Args:
        url: A ``redis://`` or ``rediss://`` URL (a database number may follow the host).
        prefix: Prepended to every key, so that several stores can share a database;
            default ``ferryman:``.
    """

    def __init__(self, url: str, prefix: str | None = None) -> None:
        self._url = url
        self._keys = Keys(DEFAULT_PREFIX if prefix is None else prefix)
        self._client: Redis | None = None
        self._scripts: Scripts | None = None
        self._messages = codec.MessageCache()
        self._histories = Histories(self._messages)
        self._search = InProcessSearch(self.chunk_changes, self._chunks)
        self.kernel = RedisKernel(None, SCHEMA, prefix=f"{self._keys.prefix}k:")
        """The storage kernel on the same database (the kinds moved onto it: :mod:`ferryman.storage.domain`)."""

    async def open(self) -> None:
        """Connect (checking the server answers), bring older data up to this layout, and register the scripts."""
        client = connect(self._url, max_connections=64)
        try:
            await client.ping()
            await upgrade(client, self._keys)
        except BaseException:
            await client.aclose()
            raise
        self._client = client
        self._scripts = Scripts(client, self._keys.prefix, LIBRARY)
        self.kernel.client = client
        await self.kernel.open()

    async def close(self) -> None:
        """Close the connection pool."""
        client, self._client, self._scripts = self._client, None, None
        await self.kernel.close()
        self.kernel.client = None
        if client is not None:
            await client.aclose()

    # ---- sessions --------------------------------------------------------

    async def create_session(self, session: SessionRecord, owner: Owner | None = None) -> None:
        """Store a new session (with its owner).

        Raises:
            ConflictError: a session with this id exists.
        """
        create = CreateSession(
            session_id=session.session_id,
            agent_id=session.agent_id,
            name=session.session_name,
            started_at=codec.dump_time(session.started_at) or "",
            owner=None if owner is None else dump_owner(owner),
        )
        await self._run(CREATE_SESSION, create)

    async def get_session(self, agent_id: str, session_id: str) -> SessionRecord:
        """Return a session of an agent or raise NotFoundError."""
        values = cast(list[str | None], await self._db.hmget(self._keys.of(SESSION, session_id), SESSION_FIELDS))
        if values[1] is None or values[0] != agent_id:
            raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found")
        return session_of(session_id, values)

    async def list_sessions(self, agent_id: str, start_index: int, limit: int | None) -> Page[SessionRecord]:
        """Return an agent's sessions in creation order."""
        ids = await self._ids(self._keys.of(AGENT_SESSIONS, agent_id), _count(limit), rank=start_index)
        rows = await self._records(self._keys.base(SESSION), ids, SESSION_FIELDS)
        page, more = page_of(rows, limit)
        return Page([session_of(row[0], row[1:]) for row in page], more)

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session with its turns, or raise NotFoundError."""
        await self._run(DELETE_SESSION, SessionOfAgent(agent_id=agent_id, session_id=session_id))


def _count(limit: int | None) -> int:
    """How many rows a page fetches: one more than it shows, to tell whether more follow (-1: all)."""
    return -1 if limit is None else limit + 1
