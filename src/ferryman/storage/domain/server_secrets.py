"""Secrets the server generates once and keeps in the store, so that every replica sharing it uses the same one.

A secret is a ``server_secret`` record named after its use (``webhooks``, ``compaction``): the server's own
(no owner), never listed or returned by any route. The first replica to need one writes it; a replica that
loses that race reads the winner's.
"""

from __future__ import annotations

from collections.abc import Callable

from ferryman.errors import ConflictError
from ferryman.storage.domain.kinds import SERVER_SECRET
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.protocol import Kernel


async def stored_secret(kernel: Kernel, name: str) -> str | None:
    """The secret generated for ``name`` (None: none yet)."""
    (rec,) = await kernel.read([ops.Get(SERVER_SECRET, name)])
    return None if rec is None else str(rec.body.get("secret", ""))


async def generated_secret(kernel: Kernel, name: str, make: Callable[[], str]) -> str:
    """The secret generated for ``name``, made by ``make`` and written now if there is none yet."""
    found = await stored_secret(kernel, name)
    if found is not None:
        return found
    try:
        await kernel.write([ops.Put(SERVER_SECRET, name, {"secret": make()})])
    except ConflictError:  # another replica wrote it first: its secret is everyone's
        pass
    found = await stored_secret(kernel, name)
    assert found is not None  # written once, never deleted
    return found
