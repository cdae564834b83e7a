"""Alembic's environment: runs the revisions on the connection (and in the transaction) the store opened.

Run by :func:`ferryman.storage.sql.migrate.upgrade`, which passes the
connection in ``config.attributes["connection"]``.
"""

from alembic import context

context.configure(connection=context.config.attributes["connection"], transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
