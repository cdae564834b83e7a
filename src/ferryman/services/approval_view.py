"""Who sees a held call in the approval inbox: exactly who may read the session its turn runs in, or its response.

A held call is stored owned like its session or response, so the policy's read
filter of that kind, evaluated on the held call's owner terms and the id of its
session or response, decides it, as reading the turn or the response would. A
list cannot hand storage that filter as it is: where it names records by id, the
ids are sessions' and responses', not held calls'. So a page is read with a
wider filter over owner terms alone (an id the policy names admits every
record where it permits, and none where it forbids), and only the held calls
the exact check admits are shown; the list reads on until its page is full.
"""

from __future__ import annotations

from ferryman.auth.principal import Principal
from ferryman.storage.domain.approvals import HeldCall
from ferryman.storage.domain.records import Stored
from ferryman.storage.kernel.filters import ALL, NOTHING, And, Filter, IdIn, Not, Or, admits, all_of, any_of, negate
from ferryman.storage.kernel.model import owner_terms

from .access import Access


class ApprovalView:
    """The held calls one caller may read.

    Args:
        access: The access policy.
        who: The caller (None: the server itself, which reads every one).
    """

    def __init__(self, access: Access, who: Principal | None) -> None:
        self._session = access.filter(who, "read", "session")
        self._response = access.filter(who, "read", "response")
        self.wide = any_of((widened(self._session), widened(self._response)))
        """A filter admitting at least every held call the caller may read (what a page is read with)."""

    def admits(self, held: Stored[HeldCall]) -> bool:
        """Whether the caller may read the session or response that holds the call."""
        call = held.value
        if call.source == "turn":
            flt, record_id = self._session, call.session_id
        else:
            flt, record_id = self._response, call.response_id
        return admits(flt, owner_terms(held.rec.owner), record_id or "")


def widened(flt: Filter, permit: bool = True) -> Filter:
    """``flt`` with every id condition replaced by what makes it admit more: any id where it permits (``permit``),
    no id where it is negated."""
    if isinstance(flt, IdIn):
        return ALL if permit else NOTHING
    if isinstance(flt, Not):
        return negate(widened(flt.inner, not permit))
    if isinstance(flt, And):
        return all_of(widened(part, permit) for part in flt.parts)
    if isinstance(flt, Or):
        return any_of(widened(part, permit) for part in flt.parts)
    return flt
