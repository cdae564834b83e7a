"""The Lua scripts of the chunk index and of ingestion jobs' claims, each a typed script.

Claiming is one script so that two replicas never take the same job; finishing
is one so that a job's outcome and its chunks are written together, and only
while the job is still in progress under the claim that leased it (a renewal
moves the lease: the finisher passes the last one it set).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ferryman.errors import NotFoundError
from ferryman.storage.redis.lua_knowledge import KNOWLEDGE_LUA
from ferryman.storage.redis.script import Outcome, Script, values

VS_FILE_FIELDS = ("created_at", "status", "attributes", "chunking_strategy", "usage_bytes", "last_error", "batch_id")
"""The fields of an attachment's hash that make its record, in the order the claim script answers them."""

_LUA_FIELDS = ", ".join(f"'{name}'" for name in VS_FILE_FIELDS)


@dataclass(frozen=True)
class Chunks:
    """Chunks of a vector store, one entry each per list (the body is JSON; the vector float32 bytes)."""

    chunk_ids: list[str]
    file_ids: list[str]
    positions: list[str]
    bodies: list[str]
    vectors: list[bytes]


@dataclass(frozen=True)
class AddChunks(Chunks):
    """Chunks inserted directly into a vector store."""

    vector_store_id: str


@dataclass(frozen=True)
class FinishIngestion(Chunks):
    """A job's outcome, its chunks and the lease end of the claim it ran under."""

    vector_store_id: str
    file_id: str
    lease: float
    status: str
    usage_bytes: int
    last_error: str | None


@dataclass(frozen=True)
class ChangesSince:
    """What a store's chunks became after version ``since`` (-1: everything), with their texts, embeddings or not."""

    vector_store_id: str
    since: int
    texts: bool
    embeddings: bool


@dataclass(frozen=True)
class RenewIngestion:
    """Move the leases of these jobs (one entry each per list) to ``lease``, each only while it holds ``helds``."""

    store_ids: list[str]
    file_ids: list[str]
    helds: list[str]
    """The lease each job was claimed or last renewed with, as ``repr`` of its float timestamp."""
    lease: float


@dataclass(frozen=True)
class ClaimIngestion:
    """Claim up to ``count`` jobs whose lease ended by ``now``, leasing them until ``lease``."""

    now: float
    lease: float
    count: int


_PUT_CHUNKS = """
for i, id in ipairs(chunk_ids) do
  put_chunk(vector_store_id, id, file_ids[i], positions[i], bodies[i], vectors[i])
end
"""

# Same ids replace their chunks (moving them to their new file's order).
ADD_CHUNKS = Script(
    AddChunks,
    KNOWLEDGE_LUA
    + """
if redis.call('EXISTS', key('vector_store', vector_store_id)) == 0 then return {NOT_FOUND} end
"""
    + _PUT_CHUNKS
    + """
return {OK}
""",
    lambda _: None,
    {Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"vector store '{a.vector_store_id}' not found")},
)

# Answers 1 if it wrote, 0 if the job was no longer in progress under this claim. The lease is compared as
# Redis stores it: both sides read the same decimal text of the same double.
FINISH_INGESTION = Script(
    FinishIngestion,
    KNOWLEDGE_LUA
    + """
local a = pair('vs_file', vector_store_id, file_id)
local held = redis.call('ZSCORE', global('ingestion'), job(vector_store_id, file_id))
if not held or tonumber(held) ~= tonumber(lease) or redis.call('HGET', a, 'status') ~= 'in_progress' then
  return {OK, 0}
end
set_status(vector_store_id, file_id, status)
add_bytes(vector_store_id, usage_bytes - tonumber(redis.call('HGET', a, 'usage_bytes') or '0'))
redis.call('HSET', a, 'usage_bytes', usage_bytes)
if last_error ~= '' then redis.call('HSET', a, 'last_error', last_error) else redis.call('HDEL', a, 'last_error') end
drop_chunks(vector_store_id, file_id)
"""
    + _PUT_CHUNKS
    + """
return {OK, 1}
""",
    lambda found: bool(int(found[0])),
)

# Answers the index (from 1) of each job it renewed; the leases compare as FINISH_INGESTION's do.
RENEW_INGESTION = Script(
    RenewIngestion,
    KNOWLEDGE_LUA
    + """
local jobs = global('ingestion')
local out = {OK}
for i, vs in ipairs(store_ids) do
  local member = job(vs, file_ids[i])
  local held = redis.call('ZSCORE', jobs, member)
  if held and tonumber(held) == tonumber(helds[i])
      and redis.call('HGET', pair('vs_file', vs, file_ids[i]), 'status') == 'in_progress' then
    redis.call('ZADD', jobs, lease, member)
    out[#out + 1] = i
  end
end
return out
""",
    lambda found: [int(i) - 1 for i in found],
)

# Answers, for each job it claimed, the store id, the file id and the attachment's fields (VS_FILE_FIELDS).
CLAIM_INGESTION = Script(
    ClaimIngestion,
    KNOWLEDGE_LUA
    + f"""
local jobs = global('ingestion')
local out = {{OK}}
for _, member in ipairs(redis.call('ZRANGEBYSCORE', jobs, '-inf', now, 'LIMIT', 0, count)) do
  local size = member:match('^(%d+):')
  local vs = member:sub(#size + 2, #size + 1 + tonumber(size))
  local file = member:sub(#size + 3 + tonumber(size))
  redis.call('ZADD', jobs, lease, member)
  out[#out + 1] = vs
  out[#out + 1] = file
  local fields = redis.call('HMGET', pair('vs_file', vs, file), {_LUA_FIELDS})
  for i = 1, {len(VS_FILE_FIELDS)} do out[#out + 1] = fields[i] end
end
return out
""",
    values,
)


def claimed_rows(found: list[Any]) -> list[tuple[str, str, list[Any]]]:
    """``(store id, file id, attachment fields)`` of each job a claim answered."""
    width = 2 + len(VS_FILE_FIELDS)
    return [(found[i], found[i + 1], found[i + 2 : i + width]) for i in range(0, len(found), width)]


_SLICE = 1000
"""Ids per ``HMGET``: Lua's ``unpack`` passes at most a few thousand values to one call."""
INLINE = 2000
"""The most chunks whose values :data:`CHUNK_CHANGES` reads itself; the client reads a larger answer's in pages."""

# Answers nothing when the store is gone; else its version, whether the answer is complete (1) or since (0), the
# chunks stamped after ``since`` (all of them when complete): their ids, stamps, file ids, bodies (when texts) and
# embeddings (when embeddings), and the removals after ``since`` (none when complete) as file id, version pairs.
# One script, so that the version and the changes are one snapshot. The values go back as Redis read them: joining
# them into fewer, longer strings in Lua cost more than the client spends reading them apart (with hiredis).
CHUNK_CHANGES = Script(
    ChangesSince,
    f"""
local store = redis.call('HMGET', key('vector_store', vector_store_id), 'version', 'removals_from')
if not store[1] then return {{OK}} end
-- An index ahead of the store (a Redis restored from an older save) starts again too.
local complete = since < tonumber(store[2] or '0') or since > tonumber(store[1])
local after = '(' .. string.format('%d', since)
local stamps = key('chunk_versions', vector_store_id)
local found
if complete then
  found = redis.call('ZRANGE', stamps, 0, -1, 'WITHSCORES')
else
  found = redis.call('ZRANGEBYSCORE', stamps, after, '+inf', 'WITHSCORES')
end
local ids, stamped = {{}}, {{}}
for i = 1, #found, 2 do
  ids[#ids + 1] = found[i]
  stamped[#stamped + 1] = found[i + 1]
end
-- Past INLINE chunks the values are left for the client to read in pages: one script reading a large store whole
-- held every other client of this Redis for seconds.
local deferred = #ids > {INLINE}
local function column(kind)
  local out = {{}}
  if deferred then return out end
  for first = 1, #ids, {_SLICE} do
    local last = math.min(first + {_SLICE - 1}, #ids)
    local got = redis.call('HMGET', key(kind, vector_store_id), unpack(ids, first, last))
    for i = 1, #got do out[#out + 1] = got[i] end
  end
  return out
end
local removed = {{}}
if not complete then removed = redis.call('ZRANGEBYSCORE', key('chunk_removals', vector_store_id), after, '+inf',
  'WITHSCORES') end
return {{OK, store[1], complete and 1 or 0, ids, stamped, column('chunk_files'),
  texts and column('chunks') or {{}}, embeddings and column('chunk_vectors') or {{}}, removed, deferred and 1 or 0}}
""",
    values,
)
