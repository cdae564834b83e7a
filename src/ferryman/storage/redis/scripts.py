"""The Lua the Redis backend keeps, its shared library, and the client side every part of the store uses.

Lua is kept where a store call must be one transaction that reads before it
writes (a check, then changes to several keys): Redis runs a script
atomically. Reads and writes that need no such check are plain commands or
pipelines. Each script is a typed :class:`~ferryman.storage.redis.script.Script`.

Scripts build keys from the prefix (``ARGV[1]``) rather than receiving them
all in ``KEYS``, since a cascade only learns its keys as it goes: the backend
targets a single Redis server (or a primary with replicas), not Redis Cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar, cast, get_args

from redis.asyncio import Redis

from ferryman.api.agents import TurnStatus
from ferryman.errors import ConflictError, FerrymanError, NotFoundError
from ferryman.storage.codec import MessageCache
from ferryman.storage.history_cache import Histories
from ferryman.storage.redis.embedded import KERNEL_WRITE, KernelWrite, with_kernel_errors
from ferryman.storage.redis.kernel import ERRORS as KERNEL_ERRORS
from ferryman.storage.redis.lua_idempotency import KEY_ERRORS, SETTLE, SettlesKey
from ferryman.storage.redis.script import LUA_OUTCOMES, Outcome, Script, ScriptCall, Scripts, nothing
from ferryman.storage.redis.store_keys import LUA_KEYS, Keys

A = TypeVar("A")
R = TypeVar("R")

# Turn statuses as Lua constants (IN_PROGRESS = 'in_progress', ...), from the one Literal that lists them.
LUA_STATUSES = "".join(f"local {status.upper()} = '{status}'\n" for status in get_args(TurnStatus))

# Functions shared by the scripts: sequence numbers, cascading deletes (the
# foreign keys of the SQL backends), steps, messages and stored events.
LIBRARY = (
    LUA_KEYS
    + LUA_OUTCOMES
    + LUA_STATUSES
    + """
local function next_seq(count) return redis.call('INCRBY', global('seq'), count) end

-- The turn no longer runs, nor waits in the session's queue.
local function release(sid, tid)
  local s = key('session', sid)
  if redis.call('HGET', s, 'running') == tid then redis.call('HDEL', s, 'running') end
  redis.call('ZREM', key('session_queued', sid), tid)
end

-- A response's events and input items are its record's in the kernel, deleted with it.
local function del_response(rid)
  redis.call('DEL', key('response', rid))
end

-- A session's history changed other than by an append: what replicas keep of it is stale (history_cache.py).
local function history_changed(sid)
  redis.call('HINCRBY', key('session', sid), 'history_epoch', 1)
end

local function del_turn(tid)
  local t = key('turn', tid)
  local f = redis.call('HMGET', t, 'session_id', 'response_id')
  if f[2] then del_response(f[2]) end
  if f[1] then
    redis.call('ZREM', key('session_turns', f[1]), tid)
    if redis.call('ZREM', key('session_done', f[1]), tid) == 1 then history_changed(f[1]) end
    release(f[1], tid)
  end
  redis.call('ZREM', global('leases'), tid)
  redis.call('DEL', t, key('steps', tid), key('step_bodies', tid), key('pending', tid),
    key('messages', tid), key('turn_events', tid))
end

local function del_session(sid)
  local s = key('session', sid)
  for _, tid in ipairs(redis.call('ZRANGE', key('session_turns', sid), 0, -1)) do del_turn(tid) end
  redis.call('DEL', s, key('session_turns', sid), key('session_done', sid), key('session_queued', sid))
end

-- A new session's anchor (its record, with its owner, is the kernel's, written by the same script). Its number
-- is the one field every anchor holds (a hash cannot be empty): start_turn reads it to find the session.
local function new_session(sid, agent)
  local s = key('session', sid)
  redis.call('HSET', s, 'seq', next_seq(1))
  if agent ~= '' then redis.call('HSET', s, 'agent_id', agent) end
end

-- Each message JSON body gets a unique id for the decode cache.
local function append_messages(tid, bodies)
  if #bodies == 0 then return end
  local id = next_seq(#bodies) - #bodies
  local list = key('messages', tid)
  for _, body in ipairs(bodies) do
    id = id + 1
    redis.call('RPUSH', list, id .. ' ' .. body)
  end
end

-- A replaced step keeps its place; only a pending step is in the pending set.
local function write_step(tid, step_id, pending, body)
  local steps = key('steps', tid)
  local score = redis.call('ZSCORE', steps, step_id)
  if not score then
    score = next_seq(1)
    redis.call('ZADD', steps, score, step_id)
  end
  redis.call('HSET', key('step_bodies', tid), step_id, body)
  if pending then
    redis.call('ZADD', key('pending', tid), score, step_id)
  else
    redis.call('ZREM', key('pending', tid), step_id)
  end
end

-- Event data numbered from first_seq, each stored as '<seq>:<data>'; with keep, a number already stored
-- keeps its event, else it is replaced.
local function save_events(events, first_seq, data, keep)
  for i, body in ipairs(data) do
    local seq = first_seq + i - 1
    if not keep or redis.call('ZCOUNT', events, seq, seq) == 0 then
      redis.call('ZREMRANGEBYSCORE', events, seq, seq)
      redis.call('ZADD', events, seq, seq .. ':' .. body)
    end
  end
end
"""
)


@dataclass(frozen=True)
class CreateSession(SettlesKey, KernelWrite):
    """Arguments of :data:`CREATE_SESSION`: the session's anchor, its record's write, and the key outcome stored
    with them."""

    session_id: str
    agent_id: str | None


@dataclass(frozen=True)
class DeleteSession(KernelWrite):
    """Arguments of :data:`DELETE_SESSION`: a session of an agent, and its record's delete."""

    agent_id: str
    session_id: str


# The session's record (the kernel's), its anchor and its key's outcome, in one script: the anchor must not exist
# (its agent, a kernel record, is checked by the service).
CREATE_SESSION = Script(
    CreateSession,
    SETTLE
    + """
local refused = key_refusal()
if refused then return refused end
if redis.call('EXISTS', key('session', session_id)) == 1 then return {CONFLICT} end
"""
    + KERNEL_WRITE
    + """
new_session(session_id, agent_id)
settle_key()
return {OK}
""",
    nothing,
    with_kernel_errors(
        {Outcome.CONFLICT: lambda a, _: ConflictError(f"session '{a.session_id}' already exists"), **KEY_ERRORS},
        KERNEL_ERRORS,
    ),
)

# A cascade, after checking whose session it is; its record goes in the same script.
DELETE_SESSION = Script(
    DeleteSession,
    """
if redis.call('HGET', key('session', session_id), 'agent_id') ~= agent_id then return {NOT_FOUND} end
"""
    + KERNEL_WRITE
    + """
del_session(session_id)
return {OK}
""",
    nothing,
    with_kernel_errors(
        {Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"session '{a.session_id}' of agent '{a.agent_id}' not found")},
        KERNEL_ERRORS,
    ),
)


class RedisBase:
    """The client and scripts the parts of :class:`~ferryman.storage.redis.store.RedisStore` share."""

    _client: Redis | None
    _scripts: Scripts | None
    _keys: Keys
    _messages: MessageCache
    _histories: Histories

    @property
    def _db(self) -> Redis:
        if self._client is None:
            raise RuntimeError("the store is not open")
        return self._client

    async def _run(self, script: Script[A, R], args: A) -> R:
        """Run a script; return its typed result or raise the error its outcome means."""
        if self._scripts is None:
            raise RuntimeError("the store is not open")
        return await self._scripts.run(script, args)

    def _call(self, script: Script[A, R], args: A) -> ScriptCall[A, R]:
        """A script with its arguments, to send beside another in one trip (``run_together``)."""
        if self._scripts is None:
            raise RuntimeError("the store is not open")
        return self._scripts.call(script, args)

    async def _ids(
        self,
        index: str,
        count: int,
        *,
        rank: int = 0,
        after: str | None = None,
        descending: bool = False,
        missing: FerrymanError | None = None,
    ) -> list[str]:
        """Up to ``count`` (-1: all) members of the sorted set ``index``, from a rank or after a member.

        Raises:
            FerrymanError: ``missing`` (or NotFoundError), when ``after`` is not in the set.
        """
        if count == 0:
            return []
        db = self._db
        if not after:
            last = -1 if count < 0 else rank + count - 1
            return cast(list[str], await db.zrange(index, rank, last, desc=descending))
        score = await db.zscore(index, after)
        if score is None:
            raise missing or NotFoundError(f"'{after}' not found")
        bound = f"({score!r}"
        limit: dict[str, Any] = {} if count < 0 else {"start": 0, "num": count}
        if descending:
            return cast(list[str], await db.zrevrangebyscore(index, bound, "-inf", **limit))
        return cast(list[str], await db.zrangebyscore(index, bound, "+inf", **limit))

    async def _records(self, base: str, ids: list[str], fields: tuple[str, ...]) -> list[list[Any]]:
        """The ``fields`` of the hashes ``base + id``, read at one moment; a record deleted meanwhile is left out."""
        if not ids:
            return []
        async with self._db.pipeline(transaction=True) as pipe:
            for record_id in ids:
                pipe.hmget(base + record_id, fields)
            rows: list[list[Any]] = await pipe.execute()
        return [[record_id, *row] for record_id, row in zip(ids, rows, strict=True) if any(v is not None for v in row)]
