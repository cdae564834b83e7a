"""Knowledge: files, vector stores, their files and batches, and the chunk index.

Unix-second times are integers on both databases; leases are epoch seconds on
SQLite (as turns' are). JSON columns are text. Chunks carry their keyword index
beside them: on SQLite an FTS5 table over ``chunks`` (external content, kept in
step by triggers in the writing transaction); on PostgreSQL a generated
``tsvector`` column with a GIN index. Their embeddings are pgvector's
``vector`` on PostgreSQL, untyped (stores differ in dimension), searched in SQL;
float32 BLOBs on SQLite, searched exactly in process (``storage/vector_cache.py``).
The extension is created in ``public`` unless the database has it already:
it is the database's, not a schema's, and one store's schema dropped with it
inside would take every other schema's embeddings along.

Revision ID: 0006_knowledge
Revises: 0005_owners
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006_knowledge"
down_revision = "0005_owners"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # BIGSERIAL; SQLite's rowid
_EPOCH = sa.DateTime(timezone=True).with_variant(sa.REAL(), "sqlite")
_FLAG = sa.Boolean().with_variant(sa.Integer(), "sqlite")
_RUNNING = sa.text("status = 'in_progress'")

_SQLITE_FTS = [
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id', "
    "tokenize='porter unicode61')",
    "CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN "
    "INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN "
    "INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER chunks_fts_update AFTER UPDATE OF text ON chunks BEGIN "
    "INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text); END",
]
_POSTGRES_FTS = [
    # English stems, after a hyphen before a digit becomes a space (IT-309: it, 309; PostgreSQL's parser reads
    # "-309" as a negative number); storage/sql/keywords.py parses queries with the same expression (tsvector()).
    "ALTER TABLE chunks ADD COLUMN text_search tsvector GENERATED ALWAYS AS ("
    "to_tsvector('english', regexp_replace(text, '(\\w)-(?=\\d)', '\\1 ', 'g'))) STORED",
    "CREATE INDEX chunks_text_search ON chunks USING gin (text_search)",
]

_POSTGRES_STORAGE = [
    # pgvector stores embeddings out of line by default: an exact search then read each one from the TOAST
    # table. Rows stay whole up to a page; past it, text and its tsvector are compressed before the embedding.
    "ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN",
    "ALTER TABLE chunks SET (toast_tuple_target = 8160)",
]


class _Vector(sa.types.UserDefinedType[Any]):
    """pgvector's ``vector`` of any dimension, named with the extension's schema (maybe off the search path)."""

    cache_ok = True

    def __init__(self, schema: str) -> None:
        self.schema = schema

    def get_col_spec(self, **_: Any) -> str:
        return '"' + self.schema.replace('"', '""') + '".vector'


def _embedding(sqlite: bool) -> sa.types.TypeEngine[Any]:
    """The embeddings' column type, creating the extension on PostgreSQL."""
    if sqlite:
        return sa.LargeBinary()
    op.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    found = op.get_bind().execute(
        sa.text(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector'"
        )
    )
    return _Vector(found.scalar_one())


def _text(name: str, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.Text(), nullable=nullable)


def _seconds(name: str, nullable: bool = False) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger(), nullable=nullable)


def _store_ref() -> sa.Column[str]:
    return sa.Column(
        "vector_store_id", sa.Text(), sa.ForeignKey("vector_stores.vector_store_id", ondelete="CASCADE"), nullable=False
    )


def upgrade() -> None:
    """Create the knowledge tables and the chunk index."""
    op.create_table(
        "files",
        sa.Column("file_id", sa.Text(), primary_key=True),
        _text("filename"),
        _text("purpose"),
        _seconds("bytes"),
        _seconds("created_at"),
        _text("mime_type"),
        _seconds("expires_at", nullable=True),
    )
    op.create_index("files_by_creation", "files", ["created_at", "file_id"])
    op.create_table(
        "vector_stores",
        sa.Column("vector_store_id", sa.Text(), primary_key=True),
        _text("name"),
        _seconds("created_at"),
        _text("embedding_model"),
        sa.Column("embedding_dimension", sa.Integer(), nullable=False),
        _text("metadata"),
        _text("chunking_strategy"),
        _text("expires_after", nullable=True),
        _seconds("last_active_at"),
        _text("provider_id", nullable=True),
        _text("provider_vector_db_id", nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )
    op.create_index("vector_stores_by_creation", "vector_stores", ["created_at", "vector_store_id"])
    op.create_table(
        "vector_store_files",
        _store_ref(),
        _text("file_id"),
        _seconds("created_at"),
        _text("status"),
        _text("attributes"),
        _text("chunking_strategy"),
        _seconds("usage_bytes"),
        _text("last_error", nullable=True),
        _text("batch_id", nullable=True),
        sa.Column("lease_until", _EPOCH, nullable=True),
        sa.PrimaryKeyConstraint("vector_store_id", "file_id"),
    )
    op.create_index(
        "vector_store_files_by_creation", "vector_store_files", ["vector_store_id", "created_at", "file_id"]
    )
    op.create_index("vector_store_files_of_file", "vector_store_files", ["file_id"])
    op.create_index(
        "ingestion_jobs", "vector_store_files", ["lease_until"], sqlite_where=_RUNNING, postgresql_where=_RUNNING
    )
    op.create_table(
        "file_batches",
        sa.Column("batch_id", sa.Text(), primary_key=True),
        _store_ref(),
        _seconds("created_at"),
        sa.Column("cancelled", _FLAG, nullable=False),
    )
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.create_table(
        "chunks",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        _store_ref(),
        _text("chunk_id"),
        _text("file_id"),
        sa.Column("position", sa.Integer(), nullable=False),
        _text("text"),
        sa.Column("token_count", sa.Integer(), nullable=False),
        _text("metadata"),
        sa.Column("embedding", _embedding(sqlite), nullable=False),
        sa.UniqueConstraint("vector_store_id", "chunk_id", name="chunks_by_id"),
    )
    op.create_index("chunks_of_file", "chunks", ["vector_store_id", "file_id", "position"])
    for statement in _SQLITE_FTS if sqlite else _POSTGRES_FTS + _POSTGRES_STORAGE:
        op.execute(statement)


def downgrade() -> None:
    """Drop the knowledge tables (not the pgvector extension: it is the database's)."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE chunks_fts")
    for table in ("chunks", "file_batches", "vector_store_files", "vector_stores", "files"):
        op.drop_table(table)
