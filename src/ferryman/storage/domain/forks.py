"""Forks' lineages over the kernel: which history a fork shares with its source, and up to where.

A fork shares, rather than copies, what it keeps of its source: its lineage is one
``fork`` record, by the fork's id, naming the source (a session, a conversation,
or a holder of a deleted source's kept part) and the last turn or item of the
source's history it shares (``through``: of the source's whole history, its own
and what it shares in turn). A conversation fork also names the shared items it
deleted (``hidden``). The record's status is its version, so a change is a
compare-and-set on the version read: two writers cannot both win.

A holder's lineage also maps the ids of the turns it copied from the deleted
original to their copies' (``renamed``): a fork below that still names an old id
(its lineage was not rewritten yet, or the rewrite was cut short) reads the copy.

While a source's shares are moved (it or an item of it is deleted, or a fork
hides an item it shares), a second record marks it (:meth:`Lineages.mark`): one
mover at a time, and a fork made meanwhile, which writes its lineage and then
reads the mark, undoes itself (the mover writes the mark and then reads the
forks: one of the two sees the other's write).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from ferryman.errors import ConflictError
from ferryman.storage.domain.kinds import FORK
from ferryman.storage.domain.records import ModelCodec, Records, Stored
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.filters import ALL
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.protocol import Kernel

_ATTEMPTS = 5
"""How often a change of a lineage is tried again after a concurrent change."""

_MARK = "moving:"
"""The id prefix of the marks of sources whose shares are being moved."""

MARK_SECONDS = 300.0
"""How long a mark holds: a mover that died leaves it, and another may take it over after this."""


class Lineage(BaseModel):
    """What a fork shares: its source's history through one turn or item, less the items it hid."""

    id: str
    of: Literal["session", "conversation"]
    source: str
    through: str
    hidden: list[str] = Field(default_factory=list)
    agent_id: str | None = None
    """A session fork's agent (where its session is found)."""
    held: bool = False
    """The source is a holder of a deleted original's kept part, deleted once no fork shares it."""
    renamed: dict[str, str] = Field(default_factory=dict)
    """A holder's: the ids of the deleted original's turns it copied, to their copies'."""
    created_at: float = Field(default_factory=time.time)


class Lineages:
    """The lineages of one kernel.

    Args:
        kernel: The backend (the server's store's ``kernel``).
    """

    def __init__(self, kernel: Kernel) -> None:
        self.records: Records[Lineage] = Records(kernel, FORK, ModelCodec(Lineage), lambda lineage: lineage.id)
        self.kernel = kernel

    async def find(self, fork_id: str) -> Lineage | None:
        """The lineage of ``fork_id``, or None when it shares nothing."""
        found = await self.records.find(fork_id)
        return None if found is None else found.value

    async def many(self, fork_ids: list[str]) -> dict[str, Lineage]:
        """The lineages of those of ``fork_ids`` that have one, in one read."""
        if not fork_ids:
            return {}
        (recs,) = await self.kernel.read([ops.GetMany(FORK, tuple(fork_ids))])
        found = [self.records.stored(rec).value for rec in recs]
        return {lineage.id: lineage for lineage in found}

    async def versions(self, fork_ids: list[str]) -> dict[str, str]:
        """The version of each of ``fork_ids``' lineages that exists, in one read."""
        if not fork_ids:
            return {}
        (recs,) = await self.kernel.read([ops.GetMany(FORK, tuple(fork_ids))])
        return {rec.id: rec.status or "1" for rec in recs}

    async def of_source(self, source: str) -> list[Lineage]:
        """Every lineage sharing ``source``'s history, in creation order."""
        page = await self.records.page(allow=ALL, where=("source", source), parent="")
        return page.items

    async def create(self, lineage: Lineage, owner: Owner | None) -> None:
        """Store a new fork's lineage (version 1).

        Raises:
            ConflictError: the fork has one.
        """
        put = ops.Put(FORK, lineage.id, self.records.codec.dump(lineage), owner=owner, status="1",
                      at=lineage.created_at)  # fmt: skip
        await self.kernel.write([put])

    async def change(self, fork_id: str, edit: Callable[[Lineage], Lineage]) -> Lineage | None:
        """Replace a lineage with ``edit`` of it as read, if no one changed it meanwhile (else read it again);
        the new lineage (None: it has none).

        Raises:
            ConflictError: it kept changing while it was read.
        """
        for _ in range(_ATTEMPTS):
            found = await self.records.find(fork_id)
            if found is None:
                return None
            changed = edit(found.value)
            if await self._replace(found, changed):
                return changed
        raise ConflictError(f"the lineage of fork '{fork_id}' kept changing; try again")

    async def _replace(self, found: Stored[Lineage], lineage: Lineage) -> bool:
        version = int(found.rec.status or "1")
        patch = ops.Patch(
            FORK,
            lineage.id,
            merge=self.records.codec.dump(lineage),
            status=str(version + 1),
            expect_status=frozenset({str(version)}),
            required=False,
        )
        (replaced,) = await self.kernel.write([patch])
        return bool(replaced)

    async def delete(self, fork_id: str) -> bool:
        """Delete a fork's lineage; whether it had one."""
        return await self.records.delete(fork_id)

    async def mark(self, source: str) -> str:
        """Mark ``source``'s shares as being moved (until :meth:`unmark`, or :data:`MARK_SECONDS`); what a mover
        that died holding it had noted (:meth:`note`; "" if none).

        Raises:
            ConflictError: another mover holds a live mark on it.
        """
        mark = Lineage(id=_MARK + source, of="session", source=_MARK + source, through="")
        until = time.time() + MARK_SECONDS
        put = ops.Put(FORK, mark.id, self.records.codec.dump(mark), status="1", lease_until=until)
        try:
            await self.kernel.write([put])
            return ""
        except ConflictError:
            found = await self.records.find(mark.id)
        busy = ConflictError(f"'{source}' is being deleted or changed; try again")
        if found is not None and (found.rec.lease_until or 0.0) > time.time():
            raise busy
        version = "1" if found is None else found.rec.status or "1"
        take = ops.Patch(FORK, mark.id, status=str(int(version) + 1), lease_until=until,
                         expect_status=frozenset({version}), required=False)  # fmt: skip
        (taken,) = await self.kernel.write([take])
        if not taken:
            raise busy
        return "" if found is None else found.value.through

    async def note(self, source: str, value: str) -> None:
        """Keep ``value`` (the holder a mover is making) in ``source``'s mark, for whoever takes it over."""
        await self.kernel.write([ops.Patch(FORK, _MARK + source, merge={"through": value}, required=False)])

    async def marked(self, source: str) -> bool:
        """Whether ``source``'s shares are being moved (a live mark)."""
        found = await self.records.find(_MARK + source)
        return found is not None and (found.rec.lease_until or 0.0) > time.time()

    async def unmark(self, source: str) -> str:
        """Lift the mark of :meth:`mark`; what was noted in it ("" if nothing)."""
        found = await self.records.find(_MARK + source)
        await self.records.delete(_MARK + source)
        return "" if found is None else found.value.through
