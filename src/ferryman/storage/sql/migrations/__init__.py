"""Alembic revisions of the SQL schema, one history for SQLite and PostgreSQL (run by :mod:`..migrate`)."""
