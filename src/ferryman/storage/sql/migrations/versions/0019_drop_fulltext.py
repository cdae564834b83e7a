"""Chunks lose the database's full-text index: keyword search runs on the in-process index of every backend.

Keyword search is answered by ``storage/search/keyword_index.py``, kept current from
the chunk feed (``0018_chunk_feed``), on SQLite and PostgreSQL as on Redis. The
FTS5 table SQLite kept in step by triggers and PostgreSQL's generated
``tsvector`` column with its GIN index are no longer read, and cost every
chunk written; they go. A downgrade makes them again from the chunks' text.

Revision ID: 0019_drop_fulltext
Revises: 0018_chunk_feed
"""

from __future__ import annotations

from alembic import op

revision = "0019_drop_fulltext"
down_revision = "0018_chunk_feed"
branch_labels = None
depends_on = None

_SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS chunks_fts_insert",
    "DROP TRIGGER IF EXISTS chunks_fts_delete",
    "DROP TRIGGER IF EXISTS chunks_fts_update",
    "DROP TABLE IF EXISTS chunks_fts",
]
_POSTGRES_DROP = [
    "DROP INDEX IF EXISTS chunks_text_search",
    "ALTER TABLE chunks DROP COLUMN IF EXISTS text_search",
]
_SQLITE_MAKE = [
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id', "
    "tokenize='porter unicode61')",
    "CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN "
    "INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN "
    "INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER chunks_fts_update AFTER UPDATE OF text ON chunks BEGIN "
    "INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text); END",
    "INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild')",
]
_POSTGRES_MAKE = [
    "ALTER TABLE chunks ADD COLUMN text_search tsvector GENERATED ALWAYS AS ("
    "to_tsvector('english', regexp_replace(text, '(\\w)-(?=\\d)', '\\1 ', 'g'))) STORED",
    "CREATE INDEX chunks_text_search ON chunks USING gin (text_search)",
]


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    """Drop the full-text table and triggers (SQLite) or column and index (PostgreSQL)."""
    for statement in _SQLITE_DROP if _sqlite() else _POSTGRES_DROP:
        op.execute(statement)


def downgrade() -> None:
    """Make them again, filled from the chunks' text."""
    for statement in _SQLITE_MAKE if _sqlite() else _POSTGRES_MAKE:
        op.execute(statement)
