"""Key naming of the Redis backend, shared by the Python side and the Lua scripts.

Every key is ``<prefix><kind>:<id>`` (or ``<prefix><kind>`` for the few global
ones). The id always comes last and each kind is a distinct word, so no id,
whatever characters it holds, can make two keys collide.

==================  ===========  ====================================================
kind                type         holds
==================  ===========  ====================================================
``seq``             string       the counter every ordering score comes from (INCR)
``session``         hash         a session's anchor (the session and its owner are a kernel record):
                                 seq (every anchor has it), agent_id (absent: no agent), running (the
                                 id of its running turn, if any), history_epoch
``session_turns``   sorted set   a session's turn ids by start
``session_done``    sorted set   its *completed* turn ids, scored like session_turns
``session_queued``  sorted set   its *queued* turn ids, scored like session_turns
``turn``            hash         the turn's columns, seq, response_id, owner (its owner JSON; absent: none)
``steps``           sorted set   a turn's step ids by first save
``step_bodies``     hash         step id -> step JSON
``pending``         sorted set   the step ids of a turn still pending (tool waits)
``messages``        list         a turn's history messages, ``"<id> <json>"``
``turn_events``     sorted set   ``"<seq>:<event JSON>"`` scored by seq
``leases``          sorted set   running turn ids by lease end (epoch seconds)
``response``        hash         the response's columns, body, interrupted (its record, which lists it and
                                 holds its owner, is the kernel's)
``idempotency``     hash         token, fingerprint, created_at, expires_at, result;
                                 id ``<len(owner)>:<owner>:<key>``, expires itself
``file_stores``     set          the vector stores a file is attached to
``vector_store``    hash         a vector store's chunk index (its settings and owner are a kernel record):
                                 seq, version (a fresh seq at every chunk change), removals_from
                                 (chunk_removals answers for versions after it), files_bytes (its
                                 attachments' usage_bytes summed, kept as they change)
``vs_files``        sorted set   a vector store's attached file ids by attachment
``vs_<status>``     sorted set   those of them in one ingestion status, scored as in vs_files
``vs_file``         hash         an attachment (id ``<len(store id)>:<store id>:<file id>``):
                                 created_at, status, attributes, chunking_strategy,
                                 usage_bytes, last_error, batch_id, seq
``vs_batches``      set          the ids of a vector store's batches with files (their records: the kernel's)
``batch_files``     sorted set   a batch's file ids, scored as in vs_files
``ingestion``       sorted set   in-progress attachments (``<len>:<store>:<file>``) by lease
                                 end (epoch seconds; ``-inf``: unclaimed)
``chunks``          hash         a vector store's chunk id -> chunk JSON (file_id, text, ...)
``chunk_vectors``   hash         chunk id -> embedding (float32 bytes)
``chunk_files``     hash         chunk id -> file id
``file_chunks``     sorted set   one file's chunk ids in a store by position (id as vs_file)
``chunk_versions``  sorted set   a store's chunk ids by the version that wrote them (0: before layout 9)
``chunk_removals``  sorted set   file ids whose chunks a write dropped, by the latest such version (the
                                 most recent ones only: ``KEPT_REMOVALS``)
``schema``          string       the layout version of the data (absent: 1)
``schema_lock``     string       held by the replica that upgrades the layout
``schema_renamed``  set          idempotency keys an unfinished upgrade to layout 4 renamed
``schema_sessions`` sorted set   session ids by number, listed by an unfinished upgrade to layout 14
==================  ===========  ====================================================
"""

from __future__ import annotations

from ferryman.redis_url import DEFAULT_PREFIX
from ferryman.storage.base import StoredEvent

SEQ = "seq"
SESSION = "session"
SESSION_TURNS = "session_turns"
SESSION_QUEUED = "session_queued"
TURN = "turn"
STEPS = "steps"
STEP_BODIES = "step_bodies"
PENDING = "pending"
MESSAGES = "messages"
TURN_EVENTS = "turn_events"
LEASES = "leases"
RESPONSE = "response"
VECTOR_STORE = "vector_store"
VS_FILES = "vs_files"
VS_FILE = "vs_file"
BATCH_FILES = "batch_files"
INGESTION = "ingestion"
CHUNKS = "chunks"
CHUNK_VECTORS = "chunk_vectors"
CHUNK_FILES = "chunk_files"
FILE_CHUNKS = "file_chunks"
CHUNK_VERSIONS = "chunk_versions"
CHUNK_REMOVALS = "chunk_removals"
SCHEMA = "schema"
SCHEMA_LOCK = "schema_lock"

# Prepended to every script: the same naming as :class:`Keys`, with the prefix
# always passed as ARGV[1].
LUA_KEYS = """
local P = ARGV[1]
local function key(kind, id) return P .. kind .. ':' .. id end
local function global(kind) return P .. kind end
"""


class Keys:
    """The Redis keys of one store.

    Args:
        prefix: Prepended to every key, so that several stores can share one database.
    """

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        self.prefix = prefix

    def of(self, kind: str, record_id: str) -> str:
        """The key of kind ``kind`` that belongs to ``record_id``."""
        return f"{self.prefix}{kind}:{record_id}"

    def global_(self, kind: str) -> str:
        """A key that belongs to no record (an index of all agents, say)."""
        return f"{self.prefix}{kind}"

    def pair(self, kind: str, first: str, second: str) -> str:
        """The key of kind ``kind`` that belongs to a record named by two ids (a vector store's file, say)."""
        return f"{self.prefix}{kind}:{pair_id(first, second)}"

    def base(self, kind: str) -> str:
        """The key of kind ``kind`` without its id, for scripts that append ids themselves."""
        return f"{self.prefix}{kind}:"


def pair_id(first: str, second: str) -> str:
    """One id made of two, ``<byte length of first>:<first>:<second>``, which no other two ids can make."""
    return f"{len(first.encode())}:{first}:{second}"


def event_member(seq: int, data: str) -> str:
    """The member that stores a stream event: ``<seq>:<data>``, unique even if two events' data are the same."""
    return f"{seq}:{data}"


def stored_event(member: str) -> StoredEvent:
    """The stream event a member of an events sorted set stores (see :func:`event_member`)."""
    seq, data = member.split(":", 1)
    return StoredEvent(int(seq), data)


def message_row(entry: str) -> tuple[int, str]:
    """``(id, JSON body)`` of a stored history message entry."""
    row_id, body = entry.split(" ", 1)
    return int(row_id), body
