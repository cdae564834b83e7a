"""The Lua scripts of files, vector stores, their attachments and batches, each a typed script.

Kept in Lua because each is one transaction in SQL: it checks before it writes
several keys, or cascades through keys it finds as it goes (a deleted file
leaves every store it was attached to, with its chunks). :data:`KNOWLEDGE_LUA`
holds the functions these scripts and those of :mod:`.lua_chunks` share;
key layout in :mod:`.store_keys`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.redis.embedded import KERNEL_WRITE, KernelWrite, with_kernel_errors
from ferryman.storage.redis.kernel import ERRORS as KERNEL_ERRORS
from ferryman.storage.redis.lua_idempotency import KEY_ERRORS, SETTLE, SettlesKey
from ferryman.storage.redis.script import Outcome, Script, nothing, values

# An attachment's key is ``vs_file:<pair>``, its ingestion job ``<pair>``, with pair = ``<#store>:<store>:<file>``
# (byte length, as :func:`.store_keys.pair_id` counts). A script that changes a store's chunks draws the store one
# fresh version from the global counter, so a version is never seen twice, not even by a store deleted and created
# again; it stamps the chunks it writes, and a file whose chunks it drops, with that version (the chunk feed,
# ``chunk_feed.py``). A file's removal keeps only its latest version: it drops every older chunk of the file, so
# it stands for the earlier ones.

KEPT_REMOVALS = 1000
"""How many files' removals a store keeps (one entry per file, so a store whose files come and go does not grow
without end). An index further behind than that many removed files reloads the store whole, which costs one full
read, as every search did before the feed; a thousand keeps that rare, and each write trims in O(log n)."""

KNOWLEDGE_LUA = f"""
local KEPT_REMOVALS = {KEPT_REMOVALS}
local function job(vs, file) return #vs .. ':' .. vs .. ':' .. file end
local function pair(kind, vs, file) return P .. kind .. ':' .. job(vs, file) end

-- The store's version for this script's changes, drawn at the first.
local versions = {{}}
local function bump(vs)
  local version = versions[vs]
  if not version then
    version = next_seq(1)
    versions[vs] = version
    redis.call('HSET', key('vector_store', vs), 'version', version)
  end
  return version
end

-- An index older than the removals pruned loads the store whole (see removals_from in store_keys.py).
local function record_removal(vs, file)
  local removals = key('chunk_removals', vs)
  redis.call('ZADD', removals, bump(vs), file)
  local over = redis.call('ZCARD', removals) - KEPT_REMOVALS
  if over > 0 then
    local pruned = redis.call('ZRANGE', removals, 0, over - 1, 'WITHSCORES')
    redis.call('ZREMRANGEBYRANK', removals, 0, over - 1)
    redis.call('HSET', key('vector_store', vs), 'removals_from', pruned[#pruned])
  end
end

local function drop_chunks(vs, file)
  local chunks = pair('file_chunks', vs, file)
  local ids = redis.call('ZRANGE', chunks, 0, -1)
  for _, id in ipairs(ids) do
    redis.call('HDEL', key('chunks', vs), id)
    redis.call('HDEL', key('chunk_vectors', vs), id)
    redis.call('HDEL', key('chunk_files', vs), id)
    redis.call('ZREM', key('chunk_versions', vs), id)
  end
  redis.call('DEL', chunks)
  if #ids > 0 then record_removal(vs, file) end
end

-- A chunk replacing one of the same id in its file needs no removal: the feed's entry replaces it. One moved to
-- another file is recorded removed from its old one (member "<file>\\0<chunk>"), or an index holding it there would
-- keep it when its new file goes before the index catches up.
local function put_chunk(vs, id, file, position, body, vector)
  local old = redis.call('HGET', key('chunk_files', vs), id)
  if old and old ~= file then
    redis.call('ZREM', pair('file_chunks', vs, old), id)
    record_removal(vs, old .. '\\0' .. id)
  end
  redis.call('HSET', key('chunks', vs), id, body)
  redis.call('HSET', key('chunk_vectors', vs), id, vector)
  redis.call('HSET', key('chunk_files', vs), id, file)
  redis.call('ZADD', pair('file_chunks', vs, file), position, id)
  redis.call('ZADD', key('chunk_versions', vs), bump(vs), id)
end

-- A store's files' bytes (``files_bytes``), kept as they change from the store's creation; a store made before it
-- was kept has none until a read sums them (STORE_FILES), and nothing is added to a sum not made yet.
local function add_bytes(vs, delta)
  local s = key('vector_store', vs)
  if delta ~= 0 and redis.call('HEXISTS', s, 'files_bytes') == 1 then redis.call('HINCRBY', s, 'files_bytes', delta) end
end

local function set_status(vs, file, status)
  local a = pair('vs_file', vs, file)
  local f = redis.call('HMGET', a, 'status', 'seq')
  redis.call('ZREM', key('vs_' .. f[1], vs), file)
  redis.call('ZADD', key('vs_' .. status, vs), f[2], file)
  redis.call('HSET', a, 'status', status)
  if status ~= 'in_progress' then redis.call('ZREM', global('ingestion'), job(vs, file)) end
end

-- Whether the file was attached; its chunks go with it.
local function detach(vs, file)
  local a = pair('vs_file', vs, file)
  local f = redis.call('HMGET', a, 'status', 'batch_id', 'usage_bytes')
  if not f[1] then return false end
  add_bytes(vs, -tonumber(f[3] or '0'))
  redis.call('ZREM', key('vs_' .. f[1], vs), file)
  if f[2] then redis.call('ZREM', key('batch_files', f[2]), file) end
  redis.call('ZREM', key('vs_files', vs), file)
  redis.call('ZREM', global('ingestion'), job(vs, file))
  redis.call('SREM', key('file_stores', file), vs)
  redis.call('DEL', a)
  drop_chunks(vs, file)
  return true
end

-- Each file as a new attachment (one attached already first loses its chunks), in list order.
local function attach_files(vs, a)
  if #a.file_ids == 0 then return end
  local seq = next_seq(#a.file_ids) - #a.file_ids
  for i, file in ipairs(a.file_ids) do
    detach(vs, file)
    seq = seq + 1
    local status, batch = a.statuses[i], a.batch_ids[i]
    local h = pair('vs_file', vs, file)
    redis.call('HSET', h, 'created_at', a.created_ats[i], 'status', status, 'attributes', a.attributes[i],
      'chunking_strategy', a.strategies[i], 'usage_bytes', a.usages[i], 'seq', seq)
    add_bytes(vs, tonumber(a.usages[i]))
    if a.errors[i] ~= '' then redis.call('HSET', h, 'last_error', a.errors[i]) end
    if batch ~= '' then
      redis.call('HSET', h, 'batch_id', batch)
      redis.call('ZADD', key('batch_files', batch), seq, file)
      redis.call('SADD', key('vs_batches', vs), batch)
    end
    redis.call('ZADD', key('vs_files', vs), seq, file)
    redis.call('ZADD', key('vs_' .. status, vs), seq, file)
    redis.call('SADD', key('file_stores', file), vs)
    if status == 'in_progress' then redis.call('ZADD', global('ingestion'), '-inf', job(vs, file)) end
  end
end

local function delete_store(vs)
  for _, file in ipairs(redis.call('ZRANGE', key('vs_files', vs), 0, -1)) do detach(vs, file) end
  for _, batch in ipairs(redis.call('SMEMBERS', key('vs_batches', vs))) do
    redis.call('DEL', key('batch_files', batch))
  end
  local seen = {{}}
  for _, file in ipairs(redis.call('HVALS', key('chunk_files', vs))) do
    if not seen[file] then redis.call('DEL', pair('file_chunks', vs, file)) end
    seen[file] = true
  end
  redis.call('DEL', key('vector_store', vs), key('vs_files', vs), key('vs_batches', vs), key('chunks', vs),
    key('chunk_vectors', vs), key('chunk_files', vs), key('chunk_versions', vs), key('chunk_removals', vs),
    key('vs_in_progress', vs), key('vs_completed', vs), key('vs_failed', vs), key('vs_cancelled', vs))
end
"""

_ATTACH = "local attachments = {file_ids = file_ids, statuses = statuses, created_ats = created_ats, " + (
    "attributes = attributes, strategies = strategies, usages = usages, errors = errors, batch_ids = batch_ids}\n"
)


@dataclass(frozen=True)
class Attachments:
    """Files to attach, one entry each per list (JSON for attributes, strategy and error; ``''``: no error, batch)."""

    file_ids: list[str]
    statuses: list[str]
    created_ats: list[str]
    attributes: list[str]
    strategies: list[str]
    usages: list[str]
    errors: list[str]
    batch_ids: list[str]


@dataclass(frozen=True)
class FileId:
    """One file."""

    file_id: str


@dataclass(frozen=True)
class CreateVectorStore(SettlesKey, KernelWrite, Attachments):
    """A new vector store's index with its first files, its record's write (the kernel's) and the key outcome
    stored with them."""

    vector_store_id: str


@dataclass(frozen=True)
class DeleteVectorStore(KernelWrite):
    """A vector store's index, and its record's delete (the kernel's)."""

    vector_store_id: str


@dataclass(frozen=True)
class AttachFiles(SettlesKey, KernelWrite, Attachments):
    """Files to attach to a vector store, the kernel's batch written with them (a file batch's record, or none)
    and the key outcome stored with them."""

    vector_store_id: str


@dataclass(frozen=True)
class StoreFile:
    """One file of one vector store."""

    vector_store_id: str
    file_id: str


@dataclass(frozen=True)
class UpdateStoreFile(StoreFile):
    """An attachment's new attributes (JSON)."""

    attributes: str


@dataclass(frozen=True)
class StoreIds:
    """Vector stores."""

    vector_store_ids: list[str]


@dataclass(frozen=True)
class CancelBatch(KernelWrite):
    """One batch of one vector store, and the kernel's write marking its record cancelled."""

    vector_store_id: str
    batch_id: str


def _store_missing(args: AttachFiles, _: list[object]) -> NotFoundError:
    return NotFoundError(f"vector store '{args.vector_store_id}' not found")


def _file_missing(args: StoreFile, _: list[object]) -> NotFoundError:
    return NotFoundError(f"file '{args.file_id}' not found in vector store '{args.vector_store_id}'")


# A deleted file leaves every vector store it was attached to, with its chunks there (its record is the kernel's).
FORGET_FILE = Script(
    FileId,
    KNOWLEDGE_LUA
    + """
for _, vs in ipairs(redis.call('SMEMBERS', key('file_stores', file_id))) do detach(vs, file_id) end
redis.call('DEL', key('file_stores', file_id))
return {OK}
""",
    nothing,
    {},
)

# A store's index with its first files and its record (the kernel's), in one script.
CREATE_VECTOR_STORE = Script(
    CreateVectorStore,
    KNOWLEDGE_LUA
    + _ATTACH
    + SETTLE
    + """
local refused = key_refusal()
if refused then return refused end
local s = key('vector_store', vector_store_id)
if redis.call('EXISTS', s) == 1 then return {CONFLICT} end
"""
    + KERNEL_WRITE
    + """
local seq = next_seq(1)
redis.call('HSET', s, 'seq', seq, 'version', seq, 'removals_from', seq, 'files_bytes', 0)
attach_files(vector_store_id, attachments)
settle_key()
return {OK, kernel_written[2]}
""",
    values,
    with_kernel_errors(
        {
            Outcome.CONFLICT: lambda a, _: ConflictError(f"vector store '{a.vector_store_id}' already exists"),
            **KEY_ERRORS,
        },
        KERNEL_ERRORS,
    ),
)

# The record says whether the store was there; its index goes whatever it says.
DELETE_VECTOR_STORE = Script(
    DeleteVectorStore,
    KNOWLEDGE_LUA
    + KERNEL_WRITE
    + """
delete_store(vector_store_id)
return {OK, kernel_written[2]}
""",
    values,
    with_kernel_errors({}, KERNEL_ERRORS),
)

ATTACH_FILES = Script(
    AttachFiles,
    KNOWLEDGE_LUA
    + _ATTACH
    + SETTLE
    + """
local refused = key_refusal()
if refused then return refused end
if redis.call('EXISTS', key('vector_store', vector_store_id)) == 0 then return {NOT_FOUND} end
"""
    + KERNEL_WRITE
    + """
attach_files(vector_store_id, attachments)
settle_key()
return {OK, kernel_written[2]}
""",
    values,
    with_kernel_errors({Outcome.NOT_FOUND: _store_missing, **KEY_ERRORS}, KERNEL_ERRORS),
)

UPDATE_STORE_FILE = Script(
    UpdateStoreFile,
    KNOWLEDGE_LUA
    + """
local a = pair('vs_file', vector_store_id, file_id)
if redis.call('EXISTS', a) == 0 then return {NOT_FOUND} end
redis.call('HSET', a, 'attributes', attributes)
return {OK}
""",
    nothing,
    {Outcome.NOT_FOUND: _file_missing},
)

DETACH_FILE = Script(
    StoreFile,
    KNOWLEDGE_LUA
    + """
if not detach(vector_store_id, file_id) then return {NOT_FOUND} end
return {OK}
""",
    nothing,
    {Outcome.NOT_FOUND: _file_missing},
)

# Files of the batch still in progress are cancelled; a claim on them then fails to finish.
CANCEL_BATCH = Script(
    CancelBatch,
    KNOWLEDGE_LUA
    + KERNEL_WRITE
    + """
for _, file in ipairs(redis.call('ZRANGE', key('batch_files', batch_id), 0, -1)) do
  if redis.call('HGET', pair('vs_file', vector_store_id, file), 'status') == 'in_progress' then
    set_status(vector_store_id, file, 'cancelled')
  end
end
return {OK, kernel_written[2]}
""",
    values,
    with_kernel_errors({}, KERNEL_ERRORS),
)

# Per store: its files in each status, then the bytes they hold (kept since the store's creation, or summed once).
STORE_FILES = Script(
    StoreIds,
    KNOWLEDGE_LUA
    + """
local out = {OK}
for _, vs in ipairs(vector_store_ids) do
  local s = key('vector_store', vs)
  local usage = redis.call('HGET', s, 'files_bytes')
  if not usage then
    usage = 0
    for _, file in ipairs(redis.call('ZRANGE', key('vs_files', vs), 0, -1)) do
      usage = usage + tonumber(redis.call('HGET', pair('vs_file', vs, file), 'usage_bytes') or '0')
    end
    if redis.call('EXISTS', s) == 1 then redis.call('HSET', s, 'files_bytes', usage) end
  end
  out[#out + 1] = {redis.call('ZCARD', key('vs_in_progress', vs)), redis.call('ZCARD', key('vs_completed', vs)),
    redis.call('ZCARD', key('vs_failed', vs)), redis.call('ZCARD', key('vs_cancelled', vs)), usage}
end
return out
""",
    lambda found: [[int(n) for n in totals] for totals in found],
)
