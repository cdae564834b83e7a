"""Live turns: each runs in its own task and publishes events to any number of readers.

The events are a façade's encoding of the engine's: numbered JSON data.

A turn's task does not belong to the HTTP request that started it, so a
client that disconnects leaves the turn to finish in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ferryman.errors import FailureCode
from ferryman.turn_records import StoredEvent

log = logging.getLogger(__name__)

S = TypeVar("S")


class TurnChannel:
    """The events of one live turn, kept so a reader that arrives late misses none.

    A run holds each event as it is made, and readers see it once it is released:
    once the log other replicas replay from holds it (the fan-out says so through
    :meth:`stored`), so that no client gets an event that a replica could not
    replay after this one died. Where no other replica reads (a lone process),
    the fan-out releases each event at once.

    Attributes:
        events: The released events, in order.
        closed: No more events will come.
        lost: The shared log refused an event (another replica ended the stream first):
            nothing held is released any more.
    """

    def __init__(self) -> None:
        self.events: list[StoredEvent] = []
        self.closed = False
        self.lost = False
        self._held: deque[StoredEvent] = deque()
        self._changed = asyncio.Event()

    def hold(self, event: StoredEvent) -> None:
        """Keep the next event, unseen until it is released."""
        self._held.append(event)

    def stored(self, seq: int) -> None:
        """The shared log holds the events up to number ``seq``: release them and wake the readers."""
        if self.lost or not self._held or self._held[0].seq > seq:
            return
        while self._held and self._held[0].seq <= seq:
            self.events.append(self._held.popleft())
        self._wake()

    def refused(self, seq: int) -> None:
        """The shared log refused event ``seq``: it and every later one stay unseen."""
        self.lost = True
        self._wake()

    async def drained(self) -> None:
        """Return once every held event is released, or the shared log refused one."""
        while self._held and not self.lost:
            await self._changed.wait()

    def close(self) -> None:
        """No more events will come (those still held are never released)."""
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def read(self, start: int = 0) -> AsyncIterator[StoredEvent]:
        """Yield the released events from index ``start`` on, then live ones until the turn ends.

        Reading stops too once the shared log refused an event: the rest of the
        stream is what another replica wrote there (see :attr:`lost`).
        """
        index = start
        while True:
            while index < len(self.events):
                yield self.events[index]
                index += 1
            if self.closed or self.lost:
                return
            await self._changed.wait()


@dataclass(frozen=True)
class StopReason:
    """Why a running turn's task was cancelled: what it fails with (the message of its ``CancelledError``)."""

    code: FailureCode
    message: str


@dataclass(eq=False)
class LiveRun(Generic[S]):
    """One run of a turn in this process: its stream's events, its task, and what its façade keeps.

    Attributes:
        turn_id: The turn.
        stream: The name of the turn's event stream (a turn's resumes continue the same stream).
        owners: Agent, session or response ids that :meth:`TurnRunner.cancel_owned_by` finds it by.
        first_seq: The number of the run's first event (a resume continues the numbering).
        subject: What the façade keeps of the run (the Responses API: the response being built).
        channel: The run's events, for the readers in this process.
        task: The task running it.
        settled: Set once the run's outcome and events are stored (a cancelled task may end before that).
    """

    turn_id: str
    stream: str
    owners: tuple[str, ...]
    first_seq: int
    subject: S
    channel: TurnChannel
    task: asyncio.Task[Any]
    settled: asyncio.Event


class TurnRunner:
    """Runs turns as background tasks; the one registry of the runs live in this process."""

    def __init__(self) -> None:
        self._runs: dict[str, LiveRun[Any]] = {}
        self._streams: dict[str, LiveRun[Any]] = {}

    def start(
        self,
        turn_id: str,
        body: Callable[[LiveRun[S]], Awaitable[Any]],
        *,
        stream: str | None = None,
        settle: Callable[[LiveRun[S]], Awaitable[None]] | None = None,
        owners: tuple[str, ...] = (),
        first_seq: int = 0,
        subject: S = None,  # type: ignore[assignment]
    ) -> LiveRun[S]:
        """Run ``body(run)`` in a task, then ``settle(run)`` (to store its outcome) however the body ends.

        ``stream`` names the run's event stream (the turn id if not given);
        ``owners``, ``first_seq`` and ``subject`` are kept on the :class:`LiveRun`.

        Settling is shielded from cancellation; the run stays registered, and its
        channel open, until it is settled, so a reader always finds its events.
        """

        async def main() -> Any:
            try:
                return await body(run)
            finally:
                await asyncio.shield(finish())

        async def finish() -> None:
            try:
                if settle is not None:
                    await settle(run)
            finally:
                run.settled.set()
                run.channel.close()
                # A resume may already have started the turn's next run under the same id.
                if self._runs.get(turn_id) is run:
                    del self._runs[turn_id], self._streams[run.stream]

        # The task starts once this returns: ``run`` is bound by then.
        task = asyncio.create_task(main(), name=f"turn-{turn_id}")
        run = LiveRun(turn_id, stream or turn_id, owners, first_seq, subject, TurnChannel(), task, asyncio.Event())
        self._runs[turn_id] = self._streams[run.stream] = run
        return run

    def running(self) -> list[str]:
        """The ids of the turns running in this process."""
        return list(self._runs)

    def run(self, turn_id: str) -> LiveRun[Any] | None:
        """The run of a turn live (or finishing) in this process."""
        return self._runs.get(turn_id)

    def on_stream(self, stream: str) -> LiveRun[Any] | None:
        """The run live in this process on the stream ``stream``."""
        return self._streams.get(stream)

    def task(self, turn_id: str) -> asyncio.Task[Any] | None:
        """The task of a turn running (or finishing) in this process."""
        run = self._runs.get(turn_id)
        return run.task if run is not None else None

    async def settled(self, turn_ids: list[str], seconds: float) -> None:
        """Wait, at most ``seconds``, until those of these turns live in this process have stored their outcome."""
        runs = [run for turn_id in turn_ids if (run := self._runs.get(turn_id)) is not None]
        await self._settling(runs, seconds)

    async def settled_owned_by(self, owner: str, seconds: float) -> None:
        """Wait, at most ``seconds``, until the runs of an agent, session or response live in this process have
        stored their outcome (a run stays live until then, whatever its turn's stored status says)."""
        await self._settling([run for run in self._runs.values() if owner in run.owners], seconds)

    async def _settling(self, runs: list[LiveRun[Any]], seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                for run in runs:
                    await run.settled.wait()

    async def cancel(self, turn_id: str, reason: str) -> None:
        """Cancel one running turn and wait until it recorded it (nothing if it does not run here)."""
        run = self._runs.get(turn_id)
        if run is not None:
            await self._cancel([run], StopReason(FailureCode.CANCELLED, reason))

    async def cancel_owned_by(self, owner: str, reason: str) -> None:
        """Cancel the running turns of an agent, session or response and wait until they recorded it."""
        owned = [run for run in self._runs.values() if owner in run.owners]
        await self._cancel(owned, StopReason(FailureCode.CANCELLED, reason))

    async def shutdown(self) -> None:
        """Cancel running turns and wait for them to record their failure.

        They fail ``interrupted``, not ``cancelled``: nobody stopped them on purpose, and the same turn
        may well succeed on a server that keeps running.
        """
        reason = StopReason(FailureCode.INTERRUPTED, "the server stopped while the turn ran")
        await self._cancel(list(self._runs.values()), reason)

    @staticmethod
    async def _cancel(runs: list[LiveRun[Any]], reason: StopReason) -> None:
        for run in runs:
            run.task.cancel(reason)
        for run in runs:
            # The task may end before its outcome is stored (cancelled again while storing it).
            await asyncio.gather(run.task, return_exceptions=True)
            await run.settled.wait()
