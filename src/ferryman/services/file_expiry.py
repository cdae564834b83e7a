"""Deleting files whose expiry has come (``expires_after`` at upload), once, by whichever replica looks first.

A file that expires is stored leased until its ``expires_at``. Each replica
looks every ``interval`` seconds and takes the files whose lease ran out, each to
exactly one replica (the kernel's ``claim_expired``), which deletes it as a
caller's delete would: out of every vector store with its chunks there, then its
bytes, then its record. A claim holds the file for :data:`HOLD_SECONDS`: a replica
that dies midway leaves it to be claimed again, and a delete is idempotent.
Until it is deleted, an expired file is already missing to every caller
(:func:`~ferryman.services.files.expired`).
"""

from __future__ import annotations

import logging
import time

from ferryman.periodic import Periodic
from ferryman.storage.domain.kinds import FILE

from .files import FileService

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 60.0
HOLD_SECONDS = 300.0
BATCH = 100


class FileExpiry:
    """The loop that deletes expired files, and one look of it (:meth:`once`), which tests call themselves.

    Args:
        files: The files.
        interval: Seconds between looks.
    """

    def __init__(self, files: FileService, interval: float = INTERVAL_SECONDS) -> None:
        self._files = files
        self._loop = Periodic("file-expiry", self.once, interval)

    async def start(self) -> None:
        """Look now (what expired while no replica ran) and every ``interval`` seconds."""
        self._loop.start()

    async def stop(self) -> None:
        """Stop looking."""
        await self._loop.stop()

    async def once(self, now: float | None = None) -> int:
        """Delete the files whose expiry came before ``now``; how many went."""
        at = time.time() if now is None else now
        kernel, deleted = self._files.records.kernel, 0
        while True:
            taken = await kernel.claim_expired(FILE, at, status=None, lease_until=at + HOLD_SECONDS, limit=BATCH)
            for rec in taken:
                try:
                    deleted += await self._files.remove(rec.id)
                except Exception:
                    log.exception("deleting expired file %s failed; its claim lapses, a later look tries again", rec.id)
            if len(taken) < BATCH:
                return deleted
