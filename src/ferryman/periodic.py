"""A background loop that does one piece of work now and then every so many seconds, until it is stopped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Periodic:
    """Runs ``beat`` at once and then every ``interval`` seconds (or at once when woken) in a task of its own.

    A beat that raises is logged and the next beat tries again: the server goes on.

    Args:
        name: The task's name, and what a failure's log line says was being done.
        beat: The work of one beat.
        interval: Seconds from the end of one beat to the start of the next, or what says them after each beat.
    """

    def __init__(self, name: str, beat: Callable[[], Awaitable[object]], interval: float | Callable[[], float]) -> None:
        self.name, self._beat = name, beat
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._woken = asyncio.Event()

    def start(self) -> None:
        """Start beating (now, then every ``interval`` seconds)."""
        self._stopping = False
        self._woken = asyncio.Event()
        self._task = asyncio.create_task(self._forever(), name=self.name)

    def wake(self) -> None:
        """Beat now rather than when the interval ends (after the beat under way, if one is)."""
        self._woken.set()

    async def stop(self) -> None:
        """Stop beating; a beat under way is cancelled."""
        if self._task is None:
            return
        # A cancellation can be lost inside a storage call (Python 3.11, the Redis client): the loop also stops
        # on the flag, at its next beat at the latest, which the event ends at once.
        self._stopping = True
        self._woken.set()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _forever(self) -> None:
        while not self._stopping:
            self._woken.clear()  # a wake from now on calls for another beat
            try:
                await self._beat()
            except Exception:
                log.exception("%s failed; tried again at the next beat", self.name)
            interval = self._interval() if callable(self._interval) else self._interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), interval)
