"""The revision a store compares a database with before it loads Alembic is Alembic's own head."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from ferryman.storage.sql.migrate import _SCRIPTS, HEAD


def test_the_head_a_store_knows_is_the_newest_revision() -> None:
    assert ScriptDirectory(str(_SCRIPTS)).get_heads() == [HEAD]
