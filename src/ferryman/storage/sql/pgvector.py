"""pgvector on the PostgreSQL backend: the check that the database has it (created if the role may), its codec,
and the settings of its HNSW scans.

Chunks' embeddings are ``vector`` columns. The store hands them to the driver
and gets them back as the records hold them, unit-length float32 little-endian
bytes; the codec turns those into pgvector's binary form (a 16-bit dimension, a
16-bit zero, then big-endian float32s) and back, so no text form is built.
"""

from __future__ import annotations

import struct
from array import array
from typing import Any, Protocol
from urllib.parse import urlsplit

from asyncpg.exceptions import DuplicateObjectError, InsufficientPrivilegeError, UniqueViolationError

from ferryman.errors import ConfigurationError

AVAILABLE = (
    "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector'), "
    "current_setting('server_version_num')::int / 10000, "
    "EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')"
)
"""Whether the server can create the extension, its major version, and whether the database has it already."""

CREATE_EXTENSION = "CREATE EXTENSION IF NOT EXISTS vector SCHEMA public"
"""What the first migration of knowledge runs too; here first, so that a role without the privilege is told why."""

EXTENSION_SCHEMA = (
    "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
)
"""The schema the extension's type and operators live in (not always on a store's search path)."""

EF_SEARCH = 100
"""``hnsw.ef_search`` of the store's connections (pgvector's default is 40). On 384-d vectors around 3,000
centroids, recall@10 against exact search was 0.9995 at 100k chunks (40 gave 0.9945, one query of 200 finding
none of its ten) and 0.991 at 300k (200: 0.996, at five times the scan's time)."""

SEARCH_SETTINGS = (
    "SELECT set_config('hnsw.ef_search', $1, false), "
    "set_config('hnsw.iterative_scan', 'relaxed_order', false) FROM pg_extension "
    "WHERE extname = 'vector' AND string_to_array(extversion, '.')::int[] >= '{0,8}'"
)
"""HNSW scans of a connection (``$1``: :data:`EF_SEARCH` as text): iterative (pgvector 0.8 on; before, the settings
are unknown and left alone).

An iterative scan goes on past ``ef_search`` candidates until enough rows
pass the query's filter (the store's, the files'), or ``hnsw.max_scan_tuples``
(20,000) are seen. In relaxed order the rows come back nearly by distance; the
query sorts its few by the exact score. Only the chunk search scans HNSW
indexes, so the settings stay for the connection's life: no round trip a search.
"""

_HEADER = struct.Struct(">HH")


class Connection(Protocol):
    """What the check needs of a connection (an ``asyncpg.Connection``)."""

    async def fetchrow(self, query: str, *args: Any) -> Any:
        """The first row of a query's answer."""
        ...

    async def execute(self, query: str, *args: Any) -> Any:
        """Run a statement."""
        ...


def where(url: str) -> str:
    """``HOST[:PORT]/DB`` of a ``postgresql://`` URL, without its user or password."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}/{parts.path.lstrip('/') or parts.username or 'postgres'}"


async def require_pgvector(conn: Connection, url: str) -> None:
    """Fail unless the database has the ``vector`` extension, creating it if the server has it and the role may.

    Args:
        conn: A connection to the database of ``url``.
        url: The database's URL (named in the error without its password).

    Raises:
        ConfigurationError: The server has no pgvector extension, or the database lacks it and the role
            may not create it.
    """
    available, major, installed = await conn.fetchrow(AVAILABLE)
    if installed:
        return
    if not available:
        raise ConfigurationError(
            f"PostgreSQL at {where(url)} has no pgvector extension (needed for vector stores): "
            f"install postgresql-{major}-pgvector (or run .ci/install-pgvector)"
        )
    try:
        await conn.execute(CREATE_EXTENSION)
    except (UniqueViolationError, DuplicateObjectError):
        pass  # another replica created it between our check and ours ("IF NOT EXISTS" does not lock)
    except InsufficientPrivilegeError as exc:
        raise ConfigurationError(
            f"PostgreSQL at {where(url)} has pgvector, but its database lacks the vector extension (needed for "
            "vector stores) and this role may not create it: an administrator must run "
            "'CREATE EXTENSION vector;' in that database"
        ) from exc


def encode(embedding: bytes) -> bytes:
    """pgvector's binary form of float32 little-endian bytes."""
    return _HEADER.pack(len(embedding) // 4, 0) + _swapped(embedding)


def decode(data: bytes) -> bytes:
    """Float32 little-endian bytes of pgvector's binary form."""
    dimension, _ = _HEADER.unpack_from(data) if len(data) >= _HEADER.size else (0, 0)
    end = _HEADER.size + 4 * dimension
    if len(data) < end:
        raise ValueError(f"a vector of {dimension} dimensions in {len(data)} bytes")
    return _swapped(memoryview(data)[_HEADER.size : end])


def _swapped(floats: bytes | memoryview) -> bytes:
    """The bytes of each 4-byte value in reverse order: little-endian float32s to big-endian and back.

    An ``array`` of 4-byte items does it in C without numpy, whose import would cost a PostgreSQL server's start
    about 15 MiB (the chunk search's own numpy loads with its first search).
    """
    values = array("f")
    values.frombytes(floats)
    values.byteswap()
    return values.tobytes()


async def register_codec(conn: Any, schema: str) -> None:
    """Have an ``asyncpg.Connection`` exchange ``vector`` values as float32 little-endian bytes.

    Args:
        conn: The connection.
        schema: The extension's schema (see :data:`EXTENSION_SCHEMA`).
    """
    await conn.set_type_codec("vector", schema=schema, encoder=encode, decoder=decode, format="binary")


async def prepare_connection(conn: Any, schema: str) -> None:
    """Register the codec (:func:`register_codec`) and set the HNSW scans' settings (:data:`SEARCH_SETTINGS`).

    Args:
        conn: A new ``asyncpg.Connection`` of the store's pool.
        schema: The extension's schema (see :data:`EXTENSION_SCHEMA`).
    """
    await register_codec(conn, schema)
    await conn.execute(SEARCH_SETTINGS, str(EF_SEARCH))
