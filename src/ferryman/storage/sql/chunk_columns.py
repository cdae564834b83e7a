"""The columns a chunk is read by, shared by the queries that read chunks whole."""

from __future__ import annotations

CHUNK_COLUMNS = "c.chunk_id, c.vector_store_id, c.file_id, c.position, c.text, c.embedding, c.token_count, c.metadata"
"""A chunk's columns, in the order :func:`ferryman.storage.sql.chunks.chunk_record` reads them."""
