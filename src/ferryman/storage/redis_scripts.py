"""How the Redis backend talks to the server: the Lua library and scripts, their registry, the client.

Each script runs atomically on the server, so a store call that must be one
transaction in SQL is one script here (and one round trip). Scripts answer a
table whose first element is ``ok`` or an error word (``not_found``,
``conflict``, ``invalid``) that :func:`checked` turns into ferryman's errors.

Scripts build keys from the prefix (ARGV[1]) rather than receiving them all in
KEYS, since a cascade only learns its keys as it goes: the backend targets a
single Redis server (or a primary with replicas), not Redis Cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from ferryman.errors import FerrymanError, NotFoundError

from .codec import MessageCache
from .redis_keys import LUA_KEYS, Keys
from .redis_lua_idempotency import IDEMPOTENCY_SCRIPTS
from .redis_lua_responses import RESPONSE_SCRIPTS
from .redis_lua_turns import TURN_SCRIPTS

# Functions shared by the scripts: sequence numbers, cascading deletes (the
# foreign keys of the SQL backends), steps, messages, items and stored events.
LIBRARY = (
    LUA_KEYS
    + """
local function next_seq(count) return redis.call('INCRBY', global('seq'), count) end

local function release(sid, tid)
  local s = key('session', sid)
  if redis.call('HGET', s, 'running') == tid then redis.call('HDEL', s, 'running') end
end

local function del_items(owner)
  redis.call('DEL', key('items', owner), key('item_bodies', owner))
end

local function del_response(rid)
  redis.call('DEL', key('response', rid), key('response_events', rid))
  redis.call('ZREM', global('responses'), rid)
  del_items(rid)
end

local function del_turn(tid)
  local t = key('turn', tid)
  local f = redis.call('HMGET', t, 'session_id', 'response_id')
  if f[2] then del_response(f[2]) end
  if f[1] then
    redis.call('ZREM', key('session_turns', f[1]), tid)
    redis.call('ZREM', key('session_done', f[1]), tid)
    release(f[1], tid)
  end
  redis.call('ZREM', global('leases'), tid)
  redis.call('DEL', t, key('steps', tid), key('step_bodies', tid), key('pending', tid),
    key('messages', tid), key('turn_events', tid))
end

local function del_conversation(cid)
  local c = key('conversation', cid)
  local sid = redis.call('HGET', c, 'session_id')
  if sid then redis.call('SREM', key('session_convs', sid), cid) end
  redis.call('DEL', c)
  del_items(cid)
end

local function del_session(sid)
  local s = key('session', sid)
  for _, tid in ipairs(redis.call('ZRANGE', key('session_turns', sid), 0, -1)) do del_turn(tid) end
  for _, cid in ipairs(redis.call('SMEMBERS', key('session_convs', sid))) do del_conversation(cid) end
  local agent = redis.call('HGET', s, 'agent_id')
  if agent then redis.call('ZREM', key('agent_sessions', agent), sid) end
  redis.call('DEL', s, key('session_turns', sid), key('session_done', sid), key('session_convs', sid))
end

-- ARGV[first..last] are message JSON bodies; each gets a unique id for the decode cache.
local function append_messages(tid, first, last)
  local count = last - first + 1
  if count <= 0 then return end
  local id = next_seq(count) - count
  local list = key('messages', tid)
  for i = first, last do
    id = id + 1
    redis.call('RPUSH', list, id .. ' ' .. ARGV[i])
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
  if pending == '1' then
    redis.call('ZADD', key('pending', tid), score, step_id)
  else
    redis.call('ZREM', key('pending', tid), step_id)
  end
end

-- ARGV[first..last] are (item id, item JSON) pairs.
local function items_ok(owner, first, last)
  local bodies, seen = key('item_bodies', owner), {}
  for i = first, last, 2 do
    local id = ARGV[i]
    if seen[id] or redis.call('HEXISTS', bodies, id) == 1 then return false end
    seen[id] = true
  end
  return true
end

local function insert_items(owner, first, last)
  local count = (last - first + 1) / 2
  if count <= 0 then return end
  local seq = next_seq(count) - count
  local order, bodies = key('items', owner), key('item_bodies', owner)
  for i = first, last, 2 do
    seq = seq + 1
    redis.call('ZADD', order, seq, ARGV[i])
    redis.call('HSET', bodies, ARGV[i], ARGV[i + 1])
  end
end

-- ARGV[first..last] are frames numbered from first_seq; a number already stored is replaced.
local function save_events(events, first_seq, first, last, keep)
  for i = first, last do
    local seq = first_seq + i - first
    if not keep or redis.call('ZCOUNT', events, seq, seq) == 0 then
      redis.call('ZREMRANGEBYSCORE', events, seq, seq)
      redis.call('ZADD', events, seq, seq .. ':' .. ARGV[i])
    end
  end
end
"""
)

# A page of an index: by rank (``rank``, ARGV[4] = first rank) or after a member
# (``after``, ARGV[4] = the member, '' = from the start); ARGV[5] = how many (-1:
# all). Each row is the id then its values: the fields ARGV[8..] of the hash
# ARGV[7] .. id (``records``), or the id's field of the hash ARGV[7] (``hash``).
_PAGE = """
local index, mode, start, count, desc = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6] == 'desc'
local ids
if mode == 'after' and start ~= '' then
  local score = redis.call('ZSCORE', index, start)
  if not score then return {'not_found'} end
  if desc then
    ids = redis.call('ZREVRANGEBYSCORE', index, '(' .. score, '-inf', 'LIMIT', 0, count)
  else
    ids = redis.call('ZRANGEBYSCORE', index, '(' .. score, '+inf', 'LIMIT', 0, count)
  end
else
  local first = 0
  if mode == 'rank' then first = tonumber(start) end
  local last = -1
  if count >= 0 then last = first + count - 1 end
  if desc then ids = redis.call('ZREVRANGE', index, first, last)
  else ids = redis.call('ZRANGE', index, first, last) end
end
local rows = {'ok'}
for _, id in ipairs(ids) do
  local row
  if ARGV[7] == 'hash' then
    row = {id, redis.call('HGET', ARGV[8], id)}
  else
    row = redis.call('HMGET', ARGV[8] .. id, unpack(ARGV, 9))
    table.insert(row, 1, id)
  end
  rows[#rows + 1] = row
end
return rows
"""

_STORE_SCRIPTS = {
    "page": _PAGE,
    "create_agent": """
local a = key('agent', ARGV[2])
if redis.call('EXISTS', a) == 1 then return {'conflict'} end
local seq = next_seq(1)
redis.call('HSET', a, 'config', ARGV[3], 'created_at', ARGV[4], 'seq', seq)
redis.call('ZADD', global('agents'), seq, ARGV[2])
return {'ok'}
""",
    "delete_agent": """
local aid = ARGV[2]
if redis.call('EXISTS', key('agent', aid)) == 0 then return {'not_found'} end
for _, sid in ipairs(redis.call('ZRANGE', key('agent_sessions', aid), 0, -1)) do del_session(sid) end
redis.call('DEL', key('agent', aid), key('agent_sessions', aid))
redis.call('ZREM', global('agents'), aid)
return {'ok'}
""",
    "create_session": """
local sid, aid = ARGV[2], ARGV[3]
local s = key('session', sid)
if aid ~= '' and redis.call('EXISTS', key('agent', aid)) == 0 then return {'not_found'} end
if redis.call('EXISTS', s) == 1 then return {'conflict'} end
local seq = next_seq(1)
redis.call('HSET', s, 'name', ARGV[4], 'started_at', ARGV[5], 'seq', seq)
if aid ~= '' then
  redis.call('HSET', s, 'agent_id', aid)
  redis.call('ZADD', key('agent_sessions', aid), seq, sid)
end
return {'ok'}
""",
    "delete_session": """
local aid, sid = ARGV[2], ARGV[3]
if redis.call('HGET', key('session', sid), 'agent_id') ~= aid then return {'not_found'} end
del_session(sid)
return {'ok'}
""",
    "save_model": """
local order = global('model_order')
if not redis.call('ZSCORE', order, ARGV[2]) then redis.call('ZADD', order, next_seq(1), ARGV[2]) end
redis.call('HSET', global('models'), ARGV[2], ARGV[3])
return {'ok'}
""",
}

SOURCES: dict[str, str] = {**_STORE_SCRIPTS, **TURN_SCRIPTS, **RESPONSE_SCRIPTS, **IDEMPOTENCY_SCRIPTS}


class Scripts:
    """Every script of the backend, registered on one client.

    Args:
        client: The client the scripts run on (they load themselves on first use).
        prefix: The key prefix, passed to every script as its first argument.
    """

    def __init__(self, client: Redis, prefix: str) -> None:
        self._prefix = prefix
        self._scripts: dict[str, AsyncScript] = {
            name: client.register_script(LIBRARY + body) for name, body in SOURCES.items()
        }

    async def run(self, name: str, *args: str | int | float) -> Any:
        """Run the script ``name`` with ``args`` after the prefix; return its raw reply."""
        return await self._scripts[name](keys=[], args=[self._prefix, *args])


def checked(reply: list[Any], errors: Mapping[str, FerrymanError]) -> list[Any]:
    """The rest of a script's reply after ``ok``, or the error its first element names.

    Raises:
        FerrymanError: the error ``errors`` gives for the word the script answered.
    """
    status = reply[0]
    if status != "ok":
        raise errors[status]
    return reply[1:]


class RedisBase:
    """The client and scripts the parts of :class:`~ferryman.storage.redis_store.RedisStore` share."""

    _client: Redis | None
    _scripts: Scripts | None
    _keys: Keys
    _messages: MessageCache

    @property
    def _db(self) -> Redis:
        if self._client is None:
            raise RuntimeError("the store is not open")
        return self._client

    async def _run(self, name: str, *args: str | int | float) -> Any:
        """Run a script with ``args`` after the prefix; return its raw reply."""
        if self._scripts is None:
            raise RuntimeError("the store is not open")
        return await self._scripts.run(name, *args)

    async def _page(
        self,
        index: str,
        start: int | str,
        count: int,
        source: tuple[str, str],
        fields: Sequence[str] = (),
        descending: bool = False,
        missing: FerrymanError | None = None,
    ) -> list[list[Any]]:
        """Rows ``[id, values…]`` of a page of the sorted set ``index`` (see ``_PAGE``).

        ``start`` is a rank (an ``int``) or the member to continue after (a
        ``str``, ``''`` for the beginning); ``count`` is the most rows (-1: all);
        ``source`` is ``("records", key base)`` or ``("hash", hash key)``.
        ``missing`` is raised when the member to continue after is not in the set.
        """
        mode = "rank" if isinstance(start, int) else "after"
        order = "desc" if descending else "asc"
        reply = await self._run("page", index, mode, start, count, order, *source, *fields)
        rows: list[list[Any]] = checked(reply, {"not_found": missing or NotFoundError(f"'{start}' not found")})
        return rows
