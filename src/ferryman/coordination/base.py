"""The fan-out seam: how the events of a running turn reach readers on other replicas.

A single process needs none of it (its readers follow the turn's in-process
channel), so :class:`LocalFanout` publishes nowhere. With ``--redis`` every
replica publishes what its turns emit and follows what the others' emit.

The fan-out's streams are also the log a replica replays a dead one's turn
from, so an event reaches this process's readers only once its stream holds
it: a run holds each event in its channel, the fan-out stores events (in
batches) and then tells the channel (a :class:`LogWatcher`) to release them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ferryman.storage.base import StoredEvent


@dataclass(frozen=True)
class RunEnded:
    """A run of the stream ended (a turn paused or finished) after the event numbered ``seq``."""

    seq: int


@dataclass(frozen=True)
class Quiet:
    """Nothing arrived for a while; ``known`` tells whether the stream exists at all."""

    known: bool


FanoutEntry = StoredEvent | RunEnded | Quiet


@dataclass(frozen=True)
class CancelTurns:
    """Every replica should cancel the turns it runs for ``owner`` (an agent, session or response id)."""

    owner: str
    reason: str


@dataclass(frozen=True)
class ModelsChanged:
    """A model was registered or unregistered: every replica should re-read the registrations."""


DeletedKind = Literal["agent", "response"]
"""The kinds of record replicas cache."""


@dataclass(frozen=True)
class RecordDeleted:
    """A record (an agent, a response…) was deleted: every replica should drop what it cached of it."""

    record_id: str | None
    """None: records may have been deleted unseen (notices were lost), so every cached one goes."""
    kind: DeletedKind | None = None
    """Which cache holds such records; None: every cache (with ``record_id`` None)."""


Notice = CancelTurns | ModelsChanged | RecordDeleted

NoticeHandler = Callable[[Notice], Awaitable[None]]
"""Called with each notice any replica (this one included) sends."""


class LogWatcher(Protocol):
    """What the fan-out tells about the events a run publishes (a turn's in-process channel)."""

    @property
    def lost(self) -> bool:
        """The stream refused one of the run's events: none of its later ones is written."""
        ...

    @property
    def closed(self) -> bool:
        """The run ended: storage took its events, and no reader here waits for the stream to hold them."""
        ...

    def stored(self, seq: int) -> None:
        """The stream holds the run's events up to number ``seq``."""
        ...

    def refused(self, seq: int) -> None:
        """The stream holds another event numbered ``seq`` (another replica ended the stream)."""
        ...


class Fanout(Protocol):
    """Publishing and following streams of numbered events (JSON data), and notices to every replica."""

    async def open(self, on_notice: NoticeHandler) -> None:
        """Connect; ``on_notice`` runs for each notice any replica sends."""
        ...

    async def close(self) -> None:
        """Send what is queued and disconnect."""
        ...

    def publish(self, stream: str, seq: int, data: str, watcher: LogWatcher | None = None) -> None:
        """Queue an event for the stream (never blocks the turn); ``watcher`` hears once it is stored or refused."""
        ...

    def end_run(self, stream: str, seq: int, watcher: LogWatcher | None = None) -> None:
        """Queue the end of a run whose last event was numbered ``seq`` (not written if ``watcher`` is lost)."""
        ...

    async def append(self, stream: str, first: int, events: list[str]) -> bool:
        """Store events numbered from ``first``, and the end of the run after them, now.

        Returns:
            False, storing nothing, if the stream already holds an event numbered ``first`` or later.
        """
        ...

    def follow(self, stream: str, after: int) -> AsyncIterator[FanoutEntry]:
        """Entries of the stream after event ``after``, as they come; never ends by itself."""
        ...

    async def notify(self, notice: Notice) -> None:
        """Send a notice to every other replica (and to this one)."""
        ...

    async def recorded(self, stream: str, after: int) -> list[StoredEvent]:
        """The events published so far numbered above ``after``, in order (what a dead replica left)."""
        ...

    async def wait_run_end(self, stream: str) -> int | None:
        """Return once the stream's latest run has ended (at once if it has, or if the stream is unknown).

        Returns:
            How many events the stream held when that run ended (the number after its last event's); None for a
            stream this fan-out does not hold.
        """
        ...


class LocalFanout:
    """One process: nothing to publish, nobody else to follow or to tell."""

    async def open(self, on_notice: NoticeHandler) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Nothing to release."""

    def publish(self, stream: str, seq: int, data: str, watcher: LogWatcher | None = None) -> None:
        """Local readers follow the turn's own channel, the only log: the event is released at once."""
        if watcher is not None:
            watcher.stored(seq)

    def end_run(self, stream: str, seq: int, watcher: LogWatcher | None = None) -> None:
        """Local readers see the channel close."""

    async def append(self, stream: str, first: int, events: list[str]) -> bool:
        """No stream to store in, nor another writer to lose to."""
        return True

    async def follow(self, stream: str, after: int) -> AsyncIterator[FanoutEntry]:
        """No other replica publishes: the stream is unknown here."""
        yield Quiet(known=False)

    async def notify(self, notice: Notice) -> None:
        """The caller already acted on its own notice in this process."""

    async def recorded(self, stream: str, after: int) -> list[StoredEvent]:
        """Nothing was published."""
        return []

    async def wait_run_end(self, stream: str) -> int | None:
        """Runs of this process are awaited on their tasks: no stream holds one."""
        return None
