"""The seam every storage backend implements once: batches of operations, leases, and opening.

Everything else (agents, sessions, turns, responses, files, registries, keys)
is written above it, once, in :mod:`ferryman.storage.domain`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ferryman.storage.kernel.model import Kind, Rec
from ferryman.storage.kernel.ops import Op, ReadOp


class Kernel(Protocol):
    """A backend: SQL (SQLite, PostgreSQL) or Redis, or the in-memory reference."""

    async def open(self) -> None:
        """Connect and make sure the kernel's tables or keys exist."""
        ...

    async def close(self) -> None:
        """Release connections; the kernel may be opened again."""
        ...

    async def write(self, ops: Sequence[Op]) -> list[Any]:
        """Run a batch atomically in one round trip; one result per operation, in order (see :mod:`.ops`)."""
        ...

    async def read(self, ops: Sequence[ReadOp]) -> list[Any]:
        """Run read operations on one consistent snapshot; one result per operation."""
        ...

    async def renew(self, kind: Kind, ids: Sequence[str], until: float) -> list[str]:
        """Extend the leases of those records that still hold one; the result: the ids renewed."""
        ...

    async def claim_expired(
        self, kind: Kind, now: float, *, status: str | None, lease_until: float | None, limit: int
    ) -> list[Rec]:
        """Take records whose lease ended before ``now``: each goes to exactly one caller across processes.

        Each claimed record gets ``status`` (None: unchanged) and ``lease_until`` (None: no lease). The result
        holds the records as they were before the claim.
        """
        ...
