"""One kind's kernel records as a caller sees them: the access step written once for every service.

A read checks the policy against the owner stored with the record (one the
caller may not read is missing to it, one it may read but not act on is a
``ForbiddenError``); a page passes the caller's filter into the kernel's query
and reads its cursor in the same trip; a patch carries its check into the write
that changes the record. Denials are audited as :class:`~.access.Access` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar, cast

from ferryman.auth.policy import Action
from ferryman.auth.principal import Principal
from ferryman.errors import NotFoundError
from ferryman.storage.domain.records import Records, Stored
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Json, PageOf, Rec
from ferryman.storage.kernel.protocol import Kernel

from .access import Access

T = TypeVar("T")


class CheckedRecords(Generic[T]):
    """The records of one kind, read and changed through the access policy.

    Args:
        records: The kind's records (unchecked: what the server itself reads).
        access: The access policy.
    """

    def __init__(self, records: Records[T], access: Access) -> None:
        self.records = records
        self.access = access
        self.kind = records.kind

    async def stored(self, who: Principal | None, record_id: str, action: Action = "read") -> Stored[T]:
        """The record, once ``who`` is allowed ``action`` on it.

        Raises:
            NotFoundError: it is missing, or ``who`` may not read it.
            ForbiddenError: ``who`` may read it but not do ``action``.
        """
        found = await self.records.find(record_id)
        if found is None:
            raise self.access.missing(who, action, self.kind, record_id)
        self.access.check(who, action, self.kind, record_id, found.rec.owner)
        return found

    async def get(self, who: Principal | None, record_id: str, action: Action = "read") -> T:
        """The value of the record, once ``who`` is allowed ``action`` on it (see :meth:`stored`)."""
        return (await self.stored(who, record_id, action)).value

    async def page(
        self, who: Principal | None, after: str | None, limit: int, order: str, where: tuple[str, str] | None = None
    ) -> PageOf[T]:
        """One page of the records ``who`` may read (filtered in the kernel's query), by creation, after the
        cursor's record, which is read in the same trip; with ``where``, only those whose indexed field holds
        that value.

        Raises:
            NotFoundError: the cursor names no record ``who`` may read (with ``where``: none of those).
        """
        allow = self.access.filter(who, "read", self.kind)
        page = ops.Page(self.kind, where=where, allow=allow, after=after, limit=limit, desc=order == "desc")
        live = None if where is None else lambda rec: rec.body.get(where[0]) == where[1]  # a cursor from elsewhere
        found = await read_page(self.records.kernel, self.access, who, page, live)
        return PageOf([self.records.stored(rec).value for rec in found.items], found.has_more)

    async def patch(self, who: Principal | None, record_id: str, merge: Json) -> None:
        """Change the fields ``merge`` names, checking ``who`` may update the record in the same write (one made
        again under the id since an earlier read may be another's), and nothing once it is deleted.

        Raises:
            NotFoundError: it is missing, or ``who`` may not read it.
            ForbiddenError: ``who`` may read it but not update it.
        """
        guard = self.access.guard(who, "update", self.kind, record_id)
        with self.access.audited(who, "update", self.kind, record_id):
            await self.records.kernel.write([guard, ops.Patch(self.kind, record_id, merge=merge)])


async def read_page(
    kernel: Kernel, access: Access, who: Principal | None, page: ops.Page, live: Callable[[Rec], bool] | None = None
) -> PageOf[Rec]:
    """One page of a kernel query, its cursor's record (``page.after``) read in the same trip and checked as a read
    of it is: one that is missing (or not ``live``) or that ``who`` may not read is a ``NotFoundError``, its
    denial audited as :meth:`.Access.missing` and :meth:`.Access.check` audit one."""
    if page.after is None:
        (found,) = await kernel.read([page])
        return cast(PageOf[Rec], found)
    try:
        cursor, found = await kernel.read([ops.Get(page.kind, page.after), page])
    except NotFoundError:  # the kernel refuses a cursor that is not there
        raise access.missing(who, "read", page.kind, page.after) from None
    if cursor is not None and live is not None and not live(cursor):
        cursor = None  # there, but not to be shown: missing to every caller
    access.cursor(who, page.kind, page.after, cursor)
    return cast(PageOf[Rec], found)
