"""The SQL stores build their statements (SQLAlchemy Core, compiled per dialect) or write them as constants.

ruff's S608 refuses a statement formatted from strings; this holds the line against a ``noqa`` that silences it.
The migrations' revisions are frozen copies of the layouts they convert, and keep their own statements.
"""

from __future__ import annotations

from pathlib import Path

import ferryman.storage

STORAGE = Path(ferryman.storage.__file__).parent
SILENCED = "noqa: " + "S608"


def test_no_storage_module_silences_the_formatted_sql_check() -> None:
    silenced = [
        f"{path.relative_to(STORAGE)}:{number}"
        for path in sorted(STORAGE.rglob("*.py"))
        if "migrations" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SILENCED in line
    ]
    assert silenced == []
