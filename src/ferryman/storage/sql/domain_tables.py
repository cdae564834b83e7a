"""The tables of the records not yet on the kernel, as SQLAlchemy Core clauses to build statements with.

The migrations (``migrations/versions``) own these tables' definitions: types, keys and indexes. Here each is
only its name and the columns the statements read or write, so that a statement is built from them and
compiled once per dialect (:meth:`~.dialects.SqlDialect.compiled`) instead of formatted from strings.
"""

from __future__ import annotations

import sqlalchemy as sa


def _table(name: str, *columns: str) -> sa.TableClause:
    return sa.table(name, *(sa.column(column) for column in columns))


sessions = _table("sessions", "id", "session_id", "agent_id", "history_epoch")
turns = _table(
    "turns",
    "id",
    "turn_id",
    "session_id",
    "agent_id",
    "status",
    "input_messages",
    "output_message",
    "overrides",
    "infer_iters",
    "error_code",
    "error_message",
    "started_at",
    "completed_at",
    "lease_until",
    "owner",
)
messages = _table("messages", "id", "session_id", "turn_id", "role", "body")
steps = _table("steps", "id", "step_id", "turn_id", "step_type", "pending", "body")
responses = _table(
    "responses",
    "id",
    "response_id",
    "turn_id",
    "session_id",
    "conversation_id",
    "previous_response_id",
    "status",
    "background",
    "body",
    "created_at",
)
idempotency_keys = _table(
    "idempotency_keys", "owner", "idempotency_key", "token", "fingerprint", "result", "created_at", "expires_at"
)
vector_stores = _table("vector_stores", "vector_store_id", "embedding_dimension", "version", "removals_from")
vector_store_files = _table(
    "vector_store_files",
    "vector_store_id",
    "file_id",
    "created_at",
    "status",
    "attributes",
    "chunking_strategy",
    "usage_bytes",
    "last_error",
    "batch_id",
    "lease_until",
)
chunks = _table(
    "chunks",
    "id",
    "vector_store_id",
    "chunk_id",
    "file_id",
    "position",
    "text",
    "token_count",
    "metadata",
    "embedding",
    "version",
)
chunk_removals = _table("chunk_removals", "id", "vector_store_id", "version", "file_id", "chunk_id")


CHUNK_COLUMNS = tuple(
    chunks.c[name]
    for name in ("chunk_id", "vector_store_id", "file_id", "position", "text", "embedding", "token_count", "metadata")
)
"""A chunk's columns, in the order :func:`ferryman.storage.sql.chunks.chunk_record` reads them."""

RESPONSE_COLUMNS = tuple(
    responses.c[name]
    for name in (
        "response_id",
        "turn_id",
        "session_id",
        "conversation_id",
        "previous_response_id",
        "background",
        "body",
    )
)
"""A response's columns, in the order :func:`ferryman.storage.rows.response_record` reads them."""
