"""The Redis backend: records in Redis structures, shared by any number of replicas.

The kinds moved onto the storage kernel (agents, sessions, conversations, ...) are its records, in the same
database; what stays in the store's own keys is a hash per record (a session's anchor, a turn, a response)
and, for each list (a session's turns, responses, an owner's items), a sorted set scored by one ``INCR``
counter, so creation order is exact and a page is a range by rank or by score, never a scan. Key layout:
:mod:`ferryman.storage.redis.store_keys`.
"""

from __future__ import annotations

from redis.asyncio import Redis

from ferryman.redis_url import DEFAULT_PREFIX, connect
from ferryman.storage import codec
from ferryman.storage.base import KeySettlement, SessionRecord
from ferryman.storage.derived_reads import DerivedReads
from ferryman.storage.domain.agents import sessions
from ferryman.storage.domain.conversations import ConversationDeletes
from ferryman.storage.domain.items import ItemRecords
from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.domain.kinds import SESSION as SESSION_KIND
from ferryman.storage.domain.responses import ResponseEvents
from ferryman.storage.history_cache import Histories
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.redis.chunks import RedisChunks
from ferryman.storage.redis.idempotency import RedisIdempotency, settlement_args
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.responses import RedisResponses
from ferryman.storage.redis.script import Scripts
from ferryman.storage.redis.scripts import CREATE_SESSION, DELETE_SESSION, LIBRARY, CreateSession, DeleteSession
from ferryman.storage.redis.store_keys import Keys
from ferryman.storage.redis.turns import RedisTurns
from ferryman.storage.redis.upgrades.runner import upgrade
from ferryman.storage.search.chunk_search import InProcessSearch


class RedisStore(
    RedisTurns,
    RedisResponses,
    RedisChunks,
    RedisIdempotency,
    DerivedReads,
    ItemRecords,
    ResponseEvents,
    ConversationDeletes,
):
    """Sessions' anchors, turns, responses and knowledge in one Redis database (the rest, agents' and sessions'
    records included: ``kernel``).

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

    async def create_session(
        self, session: SessionRecord, owner: Owner | None = None, settle: KeySettlement | None = None
    ) -> None:
        """Store a new session's record (with its owner), its anchor and ``settle``'s key outcome, in one script.

        Raises:
            ConflictError: a session with this id exists.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        put = sessions(self.kernel).put(session, owner=owner)
        create = CreateSession(
            **self.kernel.embedded([put]),
            **settlement_args(settle),
            session_id=session.session_id,
            agent_id=session.agent_id,
        )
        await self._run(CREATE_SESSION, create)

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session of an agent, its record, its anchor and its turns, in one script, or raise
        NotFoundError."""
        delete = ops.Delete(SESSION_KIND, session_id)
        args = DeleteSession(**self.kernel.embedded([delete]), agent_id=agent_id, session_id=session_id)
        await self._run(DELETE_SESSION, args)
