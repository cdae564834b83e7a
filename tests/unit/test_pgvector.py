"""pgvector on PostgreSQL: the open-time check (against a fake server answer) and the binary codec."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest

from ferryman.errors import ConfigurationError
from ferryman.storage.pgvector import AVAILABLE, decode, encode, require_pgvector, where
from ferryman.storage.sql.vectors import PgvectorIndex

pytestmark = pytest.mark.anyio

URL = "postgresql://ferry:s3cret@db.example:6543/knowledge"


class FakeServer:
    """Answers the check's one query as a server would."""

    def __init__(self, available: bool, major: int) -> None:
        self.answer = (available, major)
        self.asked: list[str] = []

    async def fetchrow(self, query: str, *args: Any) -> Any:
        self.asked.append(query)
        return self.answer


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


async def test_a_server_with_pgvector_passes() -> None:
    await require_pgvector(FakeServer(available=True, major=15), URL)


def test_where_names_host_and_database_only() -> None:
    assert where("postgresql://u:p@127.0.0.1/test") == "127.0.0.1/test"
    assert where("postgres://localhost:5432/") == "localhost:5432/postgres"


def test_the_codec_speaks_pgvectors_binary_form_and_returns_the_records_bytes() -> None:
    embedding = np.asarray([0.6, -0.8, 0.0], dtype="<f4").tobytes()
    wire = encode(embedding)
    # vector_send: int16 dimension, int16 unused (0), then big-endian float4s.
    assert wire == struct.pack(">HH3f", 3, 0, 0.6, -0.8, 0.0)
    assert decode(wire) == embedding


def test_the_search_qualifies_pgvectors_operators_with_its_schema() -> None:
    sql = PgvectorIndex('odd "schema"').nearest(" AND x")
    assert 'OPERATOR("odd ""schema""".<=>) :embedding' in sql
    assert '"odd ""schema""".vector_dims(c.embedding) = :dimension AND x ORDER BY' in sql
