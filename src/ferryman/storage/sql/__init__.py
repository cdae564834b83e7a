"""The one SQL store, written once for SQLite and PostgreSQL over a thin driver seam (see :mod:`.seam`)."""
