"""What both façades run turns with, and what they do around a turn, written once.

A façade (the Agents API, the Responses API) brings only what differs: its
encoder of engine events, the name of a turn's event stream, and how it stores
a run's outcome. The turn host launches runs, numbers and publishes their
events (to this process's readers and, through the fan-out, to other
replicas), reads a stream wherever it runs, and closes the streams a dead
replica left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ferryman.auth.quotas import Quotas
from ferryman.coordination.base import CancelTurns, Fanout
from ferryman.coordination.follow import contiguous, follow_elsewhere
from ferryman.engine.channel import LiveRun, TurnRunner
from ferryman.engine.events import Emit, EngineEvent
from ferryman.engine.loop import TurnEngine
from ferryman.storage.base import ExpiredTurn, Store, StoredEvent

from .leases import TurnLeases

log = logging.getLogger(__name__)

S = TypeVar("S")

Encode = Callable[[EngineEvent, int], list[str]]
"""A façade's encoder: the stream events (JSON data) one engine event becomes, numbered from the given number."""

StoredAfter = Callable[[int], Awaitable[list[StoredEvent]]]
"""The stored events of one stream numbered above the given number."""


@dataclass(frozen=True)
class TurnHost:
    """The pieces the Agents API and the Responses API share to run turns, and what they do with them.

    Attributes:
        store: The storage backend.
        engine: The turn engine.
        runner: The turns running in this process (the one registry of live runs).
        leases: Leases of running turns.
        fanout: Live events and notices shared with other replicas.
        quotas: The callers' quotas of running turns (none by default).
    """

    store: Store
    engine: TurnEngine
    runner: TurnRunner
    leases: TurnLeases
    fanout: Fanout
    quotas: Quotas = field(default_factory=Quotas)

    @contextlib.asynccontextmanager
    async def admitting(self, turn_id: str) -> AsyncIterator[None]:
        """Hold one of the caller's running-turn slots for ``turn_id`` while the block stores and launches it.

        The run the block launches frees the slot when it ends; a block that fails frees it at once.

        Raises:
            RateLimitedError: the caller runs as many turns as its quota allows.
        """
        took = await self.quotas.admit_turn(turn_id)
        try:
            yield
        except BaseException:
            if took:
                await asyncio.shield(self._free_slot(turn_id))
            raise

    async def _free_slot(self, turn_id: str) -> None:
        try:
            await self.quotas.turn_ended(turn_id)
        except Exception:  # the slot's lease frees it later; the turn's outcome matters more
            log.exception("running-turn slot of %s not freed", turn_id)

    def launch(
        self,
        turn_id: str,
        stream: str,
        run: Callable[[Emit], Awaitable[Any]],
        encode: Encode,
        settle: Callable[[list[str]], Awaitable[None]],
        owners: tuple[str, ...],
        first_seq: int = 0,
        subject: S = None,  # type: ignore[assignment]
    ) -> LiveRun[S]:
        """Run a turn in the background, its events encoded, numbered from ``first_seq`` and published.

        Args:
            turn_id: The turn.
            stream: The name of its event stream.
            run: The engine call, given where to emit events.
            encode: The façade's encoder.
            settle: Stores the run's outcome with its events (however the run ended).
            owners: Agent, session or response ids the run is cancelled by.
            first_seq: The number of the run's first event (a resume continues the numbering).
            subject: What the façade keeps of the run, on :attr:`LiveRun.subject`.
        """
        events: list[str] = []

        async def body(live: LiveRun[S]) -> Any:
            async def emit(event: EngineEvent) -> None:
                for data in encode(event, first_seq + len(events)):
                    seq = first_seq + len(events)
                    events.append(data)
                    self.fanout.publish(stream, seq, data)
                    await live.channel.publish(StoredEvent(seq, data))

            return await run(emit)

        async def finish(_: LiveRun[S]) -> None:
            try:
                await settle(events)
            finally:
                if events:
                    self.fanout.end_run(stream, first_seq + len(events) - 1)
                await self._free_slot(turn_id)

        return self.runner.start(
            turn_id, body, stream=stream, settle=finish, owners=owners, first_seq=first_seq, subject=subject
        )

    def live(self, stream: str) -> LiveRun[Any] | None:
        """The run live in this process on ``stream``."""
        return self.runner.on_stream(stream)

    async def events(
        self, stream: str, after: int, stored_after: StoredAfter, is_running: Callable[[], Awaitable[bool]]
    ) -> AsyncIterator[StoredEvent]:
        """A stream's events numbered above ``after``: stored ones, then live ones until the run ends.

        The run may be live here (its channel), or elsewhere: finished, or run
        by another replica (storage, then the fan-out, while ``is_running``).
        """
        live = self.live(stream)
        if live is None:
            return follow_elsewhere(self.fanout, stream, after, stored_after, is_running)
        earlier = await stored_after(after) if live.first_seq > after + 1 else []
        earlier = [event for event in earlier if event.seq < live.first_seq]
        return _chained(earlier, live.channel.read(start=max(0, after + 1 - live.first_seq)))

    async def stop(self, live: LiveRun[Any], reason: str) -> None:
        """Cancel a run of this process and wait until its outcome is stored."""
        await self.runner.cancel(live.turn_id, reason)

    async def cancel_everywhere(self, owner: str, reason: str) -> None:
        """Cancel the turns run for ``owner`` here (waiting until they recorded it) and on every other replica."""
        await self.runner.cancel_owned_by(owner, reason)
        await self.fanout.notify(CancelTurns(owner, reason))

    def on_abandoned(
        self, owns: Callable[[ExpiredTurn], bool], close: Callable[[ExpiredTurn], Awaitable[None]]
    ) -> None:
        """Call ``close`` for each turn a dead replica left that ``owns`` picks (see :meth:`close_abandoned`)."""

        async def handler(turns: list[ExpiredTurn]) -> None:
            for turn in turns:
                if owns(turn):
                    try:
                        await close(turn)
                    except Exception:  # one turn's trouble must not keep the others open
                        log.exception("events of abandoned turn %s not closed", turn.turn_id)

        self.leases.on_abandoned(handler)

    async def close_abandoned(
        self,
        stream: str,
        stored: int,
        failure: Callable[[int], list[str]],
        save: Callable[[list[str]], Awaitable[None]],
    ) -> None:
        """Store what a dead replica streamed past the ``stored`` events, ending the stream with its failure.

        Args:
            stream: The stream's name.
            stored: How many of its events are stored already.
            failure: The failure event(s) that end the stream, numbered from the given number.
            save: Stores the events from number ``stored`` on.
        """
        events = contiguous(await self.fanout.recorded(stream, stored - 1), stored)
        first_failure = stored + len(events)
        closing = failure(first_failure)
        await save([*events, *closing])
        for offset, data in enumerate(closing):
            self.fanout.publish(stream, first_failure + offset, data)
        self.fanout.end_run(stream, first_failure + len(closing) - 1)


async def _chained(stored: list[StoredEvent], live: AsyncIterator[StoredEvent]) -> AsyncIterator[StoredEvent]:
    for event in stored:
        yield event
    async for event in live:
        yield event
