"""Files as the versions before the kernel stored them (a table, or Redis hashes), and what they become.

The same files and owners go into the old SQL table (``test_sql_migrations``) and the old Redis layout
(``test_redis_upgrade``); :func:`assert_files_moved` reads them back through the kernel after the upgrade:
in their old order, equal, each with its owner, and a purpose's or a caller's page filtered in the query.
"""

from __future__ import annotations

from legacy_agents import ALICE, BOB

from ferryman.storage.domain.files import files
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import UNOWNED, Owner, attribute_term, principal_term
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.knowledge import FileRecord

WHEN = 1740830400
"""2025-03-01 12:00 UTC in Unix seconds, as files keep their times."""

# In the order they were listed (by creation time, then id), which is not their ids' order.
FILES = [
    FileRecord("file_zeta", "notes.txt", "assistants", 12, WHEN, "text/plain"),
    FileRecord("file_alpha", "batch.jsonl", "batch", 2048, WHEN + 60, "application/jsonl", expires_at=WHEN + 86400),
    FileRecord("file_mid", "photo.png", "assistants", 99, WHEN + 60, "image/png"),
    FileRecord("file_beta", "data.csv", "user_data", 0, WHEN + 120),
]
FILE_OWNERS = {"file_zeta": ALICE, "file_alpha": BOB, "file_beta": ALICE}
ORPHAN_FILE = "file_deleted_long_ago"
"""An owner row whose file is gone: the upgrade drops it."""


def owner_of(file_id: str) -> Owner | None:
    found = FILE_OWNERS.get(file_id)
    return None if found is None else Owner.from_json(found)


async def assert_files_moved(kernel: Kernel) -> None:
    """Every file is a kernel record now: in listing order, equal, with its owner; pages filter in the query."""
    records = files(kernel)
    found = await records.stored_page(parent="")
    assert [item.value for item in found.items] == FILES
    assert [item.rec.owner for item in found.items] == [owner_of(f.file_id) for f in FILES]
    assert [item.rec.at for item in found.items] == [float(f.created_at) for f in FILES]
    # Leased until it expires, as an upload writes it: the expiry sweep claims it then.
    assert [item.rec.lease_until for item in found.items] == [None, float(WHEN + 86400), None, None]
    assistants = await records.page(where=("purpose", "assistants"))
    assert [f.file_id for f in assistants.items] == ["file_zeta", "file_mid"]
    assert [f.file_id for f in (await records.page(where=("purpose", "batch"))).items] == ["file_alpha"]
    alice = Terms(frozenset({principal_term("key:alice")}))
    assert [f.file_id for f in await records.all(allow=alice)] == ["file_zeta", "file_beta"]
    blue = Terms(frozenset({attribute_term("teams", "blue")}))
    assert [f.file_id for f in await records.all(allow=blue)] == ["file_alpha"]
    nobody = Terms(frozenset({UNOWNED}))
    assert [f.file_id for f in await records.all(allow=nobody)] == ["file_mid"]
    assert await records.find(ORPHAN_FILE) is None
