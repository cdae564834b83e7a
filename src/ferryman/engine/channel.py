"""Live turns: each runs in its own task and publishes events to any number of readers.

The events are the engine's own, or a façade's translation of them (the
Responses API publishes its numbered stream events).

A turn's task does not belong to the HTTP request that started it, so a
client that disconnects leaves the turn to finish in the background.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


class TurnChannel:
    """The events of one live turn, kept so a reader that arrives late misses none."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.closed = False
        self._changed = asyncio.Event()

    async def publish(self, event: Any) -> None:
        """Append an event and wake the readers."""
        self.events.append(event)
        self._wake()

    def close(self) -> None:
        """No more events will come."""
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def read(self, start: int = 0) -> AsyncIterator[Any]:
        """Yield the events from index ``start`` on, then live ones until the turn ends."""
        index = start
        while True:
            while index < len(self.events):
                yield self.events[index]
                index += 1
            if self.closed:
                return
            await self._changed.wait()


class TurnRunner:
    """Runs turns as background tasks and keeps their channels while they live."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._channels: dict[str, TurnChannel] = {}
        self._owners: dict[str, tuple[str, ...]] = {}

    def start(
        self,
        turn_id: str,
        body: Callable[[TurnChannel], Awaitable[Any]],
        owners: tuple[str, ...] = (),
        channel: TurnChannel | None = None,
    ) -> tuple[TurnChannel, asyncio.Task[Any]]:
        """Run ``body(channel)`` in a task; the channel closes when it ends, however it ends.

        ``owners`` (agent, session or response ids) let :meth:`cancel_owned_by`
        find the turn; ``channel`` may be made beforehand by a caller that
        wires it up before the task starts.
        """
        channel = channel or TurnChannel()

        async def run() -> Any:
            try:
                return await body(channel)
            finally:
                channel.close()
                # A resume may already have started the turn's next run under the same id.
                if self._tasks.get(turn_id) is asyncio.current_task():
                    del self._tasks[turn_id], self._channels[turn_id], self._owners[turn_id]

        task = asyncio.create_task(run(), name=f"turn-{turn_id}")
        self._tasks[turn_id] = task
        self._channels[turn_id] = channel
        self._owners[turn_id] = owners
        return channel, task

    def running(self) -> list[str]:
        """The ids of the turns running in this process."""
        return list(self._tasks)

    def channel(self, turn_id: str) -> TurnChannel | None:
        """The channel of a turn running in this process."""
        return self._channels.get(turn_id)

    def task(self, turn_id: str) -> asyncio.Task[Any] | None:
        """The task of a turn running (or finishing) in this process."""
        return self._tasks.get(turn_id)

    async def cancel(self, turn_id: str, reason: str) -> None:
        """Cancel one running turn and wait until it recorded it (nothing if it does not run here)."""
        task = self._tasks.get(turn_id)
        if task is not None:
            await self._cancel([task], reason)

    async def cancel_owned_by(self, owner: str, reason: str) -> None:
        """Cancel the running turns of an agent or session and wait until they recorded it."""
        turn_ids = [turn_id for turn_id, owners in self._owners.items() if owner in owners]
        await self._cancel([self._tasks[t] for t in turn_ids if t in self._tasks], reason)

    async def shutdown(self) -> None:
        """Cancel running turns and wait for them to record their failure."""
        await self._cancel(list(self._tasks.values()), "the server stopped while the turn ran")

    @staticmethod
    async def _cancel(tasks: list[asyncio.Task[Any]], reason: str) -> None:
        for task in tasks:
            task.cancel(reason)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
