"""A kernel that counts its round trips: what the bench and the round-trip tests measure a request by.

Every call of the kernel is one round trip to its database (one transaction, one
script), so counting calls counts round trips.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ferryman.storage.kernel.model import Kind, Rec
from ferryman.storage.kernel.ops import Op, ReadOp
from ferryman.storage.kernel.protocol import Kernel


class CountingKernel:
    """A :class:`~.protocol.Kernel` that passes every call to ``inner`` and counts them.

    Args:
        inner: The kernel that does the work.

    Attributes:
        writes: ``write`` calls since the last :meth:`reset`.
        reads: ``read`` calls.
        renews: ``renew`` calls.
        claims: ``claim_expired`` calls.
    """

    def __init__(self, inner: Kernel) -> None:
        self.inner = inner
        self.writes = 0
        self.reads = 0
        self.renews = 0
        self.claims = 0

    @property
    def round_trips(self) -> int:
        """Every counted call: writes, reads, renews and claims."""
        return self.writes + self.reads + self.renews + self.claims

    def reset(self) -> None:
        """Count from zero again."""
        self.writes = self.reads = self.renews = self.claims = 0

    async def open(self) -> None:
        """Open the inner kernel (not counted: it happens once, at start)."""
        await self.inner.open()

    async def close(self) -> None:
        """Close the inner kernel (not counted)."""
        await self.inner.close()

    async def write(self, ops: Sequence[Op]) -> list[Any]:
        """Run a batch on the inner kernel; one write."""
        self.writes += 1
        return await self.inner.write(ops)

    async def read(self, ops: Sequence[ReadOp]) -> list[Any]:
        """Run reads on the inner kernel; one read."""
        self.reads += 1
        return await self.inner.read(ops)

    async def renew(self, kind: Kind, ids: Sequence[str], until: float) -> list[str]:
        """Renew leases on the inner kernel; one renew."""
        self.renews += 1
        return await self.inner.renew(kind, ids, until)

    async def claim_expired(
        self, kind: Kind, now: float, *, status: str | None, lease_until: float | None, limit: int
    ) -> list[Rec]:
        """Claim expired leases on the inner kernel; one claim."""
        self.claims += 1
        return await self.inner.claim_expired(kind, now, status=status, lease_until=lease_until, limit=limit)
