"""pgvector on PostgreSQL: the open-time check (against a fake server answer) and the binary codec."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
from asyncpg.exceptions import InsufficientPrivilegeError, UniqueViolationError

from ferryman.errors import ConfigurationError
from ferryman.storage.sql.pgvector import AVAILABLE, CREATE_EXTENSION, decode, encode, require_pgvector, where
from ferryman.storage.sql.vectors import PgvectorIndex

pytestmark = pytest.mark.anyio

URL = "postgresql://ferry:s3cret@db.example:6543/knowledge"


class FakeServer:
    """Answers the check's query as a server would, and runs (or refuses) the statement that creates the extension."""

    def __init__(self, available: bool, major: int, installed: bool = False, may_create: bool = True) -> None:
        self.answer = (available, major, installed)
        self.may_create = may_create
        self.asked: list[str] = []

    async def fetchrow(self, query: str, *args: Any) -> Any:
        self.asked.append(query)
        return self.answer

    async def execute(self, query: str, *args: Any) -> Any:
        self.asked.append(query)
        if not self.may_create:
            raise InsufficientPrivilegeError('permission denied to create extension "vector"')
        return "CREATE EXTENSION"


async def test_a_server_without_pgvector_fails_with_what_to_install_and_no_password() -> None:
    server = FakeServer(available=False, major=16)
    with pytest.raises(ConfigurationError) as caught:
        await require_pgvector(server, URL)
    assert str(caught.value) == (
        "PostgreSQL at db.example:6543/knowledge has no pgvector extension (needed for vector stores): "
        "install postgresql-16-pgvector (or run .ci/install-pgvector)"
    )
    assert "s3cret" not in str(caught.value)
    assert server.asked == [AVAILABLE]
    assert "pg_available_extensions" in AVAILABLE


async def test_a_database_with_the_extension_passes_without_creating_it() -> None:
    server = FakeServer(available=True, major=15, installed=True, may_create=False)
    await require_pgvector(server, URL)
    assert server.asked == [AVAILABLE]


async def test_a_database_without_the_extension_gets_it_created() -> None:
    server = FakeServer(available=True, major=15)
    await require_pgvector(server, URL)
    assert server.asked == [AVAILABLE, CREATE_EXTENSION]


async def test_a_role_that_may_not_create_the_extension_is_told_an_administrator_must() -> None:
    server = FakeServer(available=True, major=16, may_create=False)
    with pytest.raises(ConfigurationError) as caught:
        await require_pgvector(server, URL)
    assert str(caught.value) == (
        "PostgreSQL at db.example:6543/knowledge has pgvector, but its database lacks the vector extension "
        "(needed for vector stores) and this role may not create it: an administrator must run "
        "'CREATE EXTENSION vector;' in that database"
    )
    assert "s3cret" not in str(caught.value)
    assert isinstance(caught.value.__cause__, InsufficientPrivilegeError)


def test_where_names_host_and_database_only() -> None:
    assert where("postgresql://u:p@127.0.0.1/test") == "127.0.0.1/test"
    assert where("postgres://localhost:5432/") == "localhost:5432/postgres"


def test_the_codec_speaks_pgvectors_binary_form_and_returns_the_records_bytes() -> None:
    embedding = np.asarray([0.6, -0.8, 0.0], dtype="<f4").tobytes()
    wire = encode(embedding)
    # vector_send: int16 dimension, int16 unused (0), then big-endian float4s.
    assert wire == struct.pack(">HH3f", 3, 0, 0.6, -0.8, 0.0)
    assert decode(wire) == embedding


@pytest.mark.parametrize("dimension", [0, 1, 384, 1536])
def test_the_codec_matches_numpys_byte_order_at_every_size(dimension: int) -> None:
    embedding = np.random.default_rng(dimension).standard_normal(dimension).astype("<f4")
    wire = encode(embedding.tobytes())
    assert wire == struct.pack(">HH", dimension, 0) + embedding.astype(">f4").tobytes()
    assert decode(wire) == embedding.tobytes()


def test_a_vector_shorter_than_its_dimension_is_refused() -> None:
    wire = encode(np.ones(4, dtype="<f4").tobytes())
    with pytest.raises(ValueError, match="4 dimensions in 16 bytes"):
        decode(wire[:-4])
    with pytest.raises(ValueError):
        decode(wire[:3])  # not even the header


def test_the_search_qualifies_pgvectors_operators_with_its_schema() -> None:
    index = PgvectorIndex('odd "schema"')
    sql = index.exact(files=True).sql
    assert 'OPERATOR("odd ""schema""".<=>) :embedding' in sql
    assert '"odd ""schema""".vector_dims(chunks.embedding) = :dimension ORDER BY' in sql
    approximate = index.approximate(False, 384, "vs_1").sql
    assert "chunks.vector_store_id = 'vs_1'" in approximate
    assert 'CAST(chunks.embedding AS "odd ""schema""".vector(384)) OPERATOR("odd ""schema""".<=>)' in approximate
    schema = '"odd ""schema"""'
    assert index.create_index(384) == (
        "CREATE INDEX IF NOT EXISTS chunks_embedding_384 ON chunks USING hnsw "
        f"(CAST(embedding AS {schema}.vector(384)) {schema}.vector_cosine_ops) "
        f"WHERE {schema}.vector_dims(embedding) = 384"
    )


@pytest.mark.parametrize("schema", ["Ext", "select", "pg%ext"])
def test_the_extensions_schema_is_quoted_whatever_its_case_or_characters(schema: str) -> None:
    index, quoted = PgvectorIndex(schema), f'"{schema}"'
    assert f"{quoted}.vector_dims(chunks.embedding) = :dimension" in index.exact(files=False).sql
    approximate = index.approximate(False, 384, "vs_1").sql
    assert f"{quoted}.vector_dims(chunks.embedding) = 384" in approximate
    assert f"CAST(chunks.embedding AS {quoted}.vector(384)) OPERATOR({quoted}.<=>)" in approximate
    assert f"WHERE {quoted}.vector_dims(embedding) = 384" in index.create_index(384)


def test_a_store_id_that_is_not_plain_is_bound_not_written_in() -> None:
    sql = PgvectorIndex("public").approximate(False, 384, "vs:1'x").sql
    assert "chunks.vector_store_id = :vector_store_id" in sql
    assert "vs:1" not in sql


class RacedServer(FakeServer):
    """Another replica creates the extension between the check and the create ("IF NOT EXISTS" takes no lock)."""

    async def execute(self, query: str, *args: Any) -> Any:
        self.asked.append(query)
        raise UniqueViolationError('duplicate key value violates unique constraint "pg_extension_name_index"')


async def test_an_extension_created_by_another_replica_meanwhile_is_fine() -> None:
    server = RacedServer(available=True, major=15)
    await require_pgvector(server, URL)
    assert server.asked == [AVAILABLE, CREATE_EXTENSION]
