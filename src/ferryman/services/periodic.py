"""A background loop that does one piece of work now and then every so many seconds, until it is stopped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Periodic:
    """Runs ``beat`` at once and then every ``interval`` seconds in a task of its own.

    A beat that raises is logged and the next beat tries again: the server goes on.

    Args:
        name: The task's name, and what a failure's log line says was being done.
        beat: The work of one beat.
        interval: Seconds from the end of one beat to the start of the next.
    """

    def __init__(self, name: str, beat: Callable[[], Awaitable[object]], interval: float) -> None:
        self.name, self._beat, self._interval = name, beat, interval
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    def start(self) -> None:
        """Start beating (now, then every ``interval`` seconds)."""
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._forever(), name=self.name)

    async def stop(self) -> None:
        """Stop beating; a beat under way is cancelled."""
        if self._task is None:
            return
        # A cancellation can be lost inside a storage call (Python 3.11, the Redis client): the loop also stops
        # on the flag, at its next beat at the latest, which the event ends at once.
        self._stopping.set()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _forever(self) -> None:
        while not self._stopping.is_set():
            try:
                await self._beat()
            except Exception:
                log.exception("%s failed; tried again at the next beat", self.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._interval)
