"""Usage: the tokens each run of a turn or response used, stored as it ends, and summed over a time range.

Each run (an Agents API turn's, a resume's, a response's) counts the usage of the
inference steps it completes, from the events it emits, and stores one ``usage``
record when it ends, owned by its caller: in the background (:meth:`UsageLedger.submit`),
so that the run's stream ends without waiting for a storage write; a summary, and the
app's stop, first wait for the writes under way (:meth:`UsageLedger.flush`). A turn paused for client tools and
resumed is two runs: each stores its own tokens, and only the first counts the
turn. ``GET /v1/usage`` reads the records of a range a page at a time and sums
them per agent, principal or model, reading at most ``usage.max_records``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from ferryman.api.agents import InferenceStep
from ferryman.api.usage import UsageGroup, UsageRow, UsageSummary
from ferryman.auth.filters import owner_of
from ferryman.auth.principal import Principal, current_principal
from ferryman.engine.events import EngineEvent, StepCompleted
from ferryman.errors import FerrymanError, InvalidRequestError
from ferryman.storage.domain.kinds import USAGE
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.filters import Filter
from ferryman.storage.kernel.model import Owner, Rec
from ferryman.storage.kernel.protocol import Kernel

from .access import Access

log = logging.getLogger(__name__)

DEFAULT_MAX_RECORDS = 100_000
"""The most usage records one summary reads by default (``usage.max_records``)."""
PAGE_SIZE = 1000
"""How many records one read of a summary fetches."""
WRITE_BATCH = 100
"""The most runs' records one write stores (those ended meanwhile wait for the next)."""
MAX_PENDING = 100 * WRITE_BATCH
"""The most runs' records that wait for the writer (about a kilobyte each)."""

Api = Literal["agents", "responses"]


@dataclass
class RunUsage:
    """What one run used, counted from the events it emits.

    Attributes:
        api: The façade that runs it.
        run_id: The turn's or the response's id.
        first_seq: The number of the run's first event (0 for a turn's first run; a resume's is later).
        model: The model it calls.
        agent_id: The agent whose turn it is (None: a response).
        conversation_id: The session or conversation it continues.
        owner: Who runs it (by default the current principal; None: the server itself).
        ended_at: When it ended (seconds since the epoch), the stored record's time (None: when it is written).
    """

    api: Api
    run_id: str
    first_seq: int
    model: str
    agent_id: str | None = None
    conversation_id: str | None = None
    owner: Owner | None = field(default_factory=lambda: owner_of(current_principal.get()))
    ended_at: float | None = None
    _steps: dict[str, tuple[int, int]] = field(default_factory=dict)

    def saw(self, event: EngineEvent) -> None:
        """Count the tokens of an inference step the run completed (a step completed twice counts once)."""
        if isinstance(event, StepCompleted) and isinstance(event.step, InferenceStep) and event.step.usage:
            self._steps[event.step.step_id] = (event.step.usage.input_tokens, event.step.usage.output_tokens)

    @property
    def input_tokens(self) -> int:
        """Prompt tokens of the run's model calls."""
        return sum(counted[0] for counted in self._steps.values())

    @property
    def output_tokens(self) -> int:
        """Tokens the run's model calls wrote."""
        return sum(counted[1] for counted in self._steps.values())

    def put(self) -> ops.Put:
        """The write storing the run's usage (its id is the run's, so a run is stored once)."""
        body = {
            "api": self.api,
            "run_id": self.run_id,
            "agent_id": self.agent_id,
            "conversation_id": self.conversation_id,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "turns": 1 if self.first_seq == 0 else 0,
        }
        return ops.Put(USAGE, f"{self.run_id}.{self.first_seq}", body, owner=self.owner, at=self.ended_at)


class UsageLedger:
    """Stores what runs used and sums it for whoever may read it.

    Args:
        kernel: The backend.
        access: The access policy (who reads whose usage).
        max_records: The most records one summary reads (``usage.max_records``).
    """

    def __init__(self, kernel: Kernel, access: Access, max_records: int = DEFAULT_MAX_RECORDS) -> None:
        if max_records < 1:
            raise ValueError(f"usage.max_records must be at least 1, not {max_records}")
        self._kernel = kernel
        self._access = access
        self.max_records = max_records
        self._pending: list[RunUsage] = []
        self._writer: asyncio.Task[None] | None = None

    def submit(self, usage: RunUsage) -> None:
        """Store what a run used in the background (never waits: a run's stream ends without the write).

        The record's time is now, when the run ended, however late the write. Runs that end while a write is
        under way are stored together by the next one: one transaction (one script) for many runs under load.
        While :data:`MAX_PENDING` runs already wait (the store down or far behind), a run's usage is dropped,
        and logged.
        """
        if usage.ended_at is None:
            usage.ended_at = time.time()
        if len(self._pending) >= MAX_PENDING:
            log.error("usage of run %s not stored: %d runs' usage wait for the store", usage.run_id, MAX_PENDING)
            return
        self._pending.append(usage)
        self._start_writer()

    async def flush(self) -> None:
        """Wait until every write submitted so far has ended (a flush cancelled leaves them going on)."""
        while self._pending or (self._writer is not None and not self._writer.done()):
            writer = self._start_writer()  # also for runs left by a writer cancelled before it took them
            await asyncio.wait({writer})

    def _start_writer(self) -> asyncio.Task[None]:
        if self._writer is None or self._writer.done():
            # A context of its own: the writer stores many runs' records, so it logs and traces as none of them.
            self._writer = asyncio.create_task(self._drain(), name="usage-writer", context=contextvars.Context())
        return self._writer

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:WRITE_BATCH], self._pending[WRITE_BATCH:]
            try:
                await self._write(batch)
            except asyncio.CancelledError:
                log.error("usage of %d runs not stored: its write was cancelled", len(batch))
                raise

    async def _write(self, batch: list[RunUsage]) -> None:
        """Store the batch's records in one write (a failure logged, not raised: the runs' outcomes are stored).

        A batch the store refuses (a record's id taken) is written again a record at a time, so that one bad
        record loses no other; one the store fails (down, timed out) is not retried, which would only multiply
        the failing trips while the runs behind it wait.
        """
        try:
            await self._kernel.write([usage.put() for usage in batch])
        except FerrymanError:
            if len(batch) == 1:
                log.exception("usage of run %s not stored", batch[0].run_id)
                return
            for usage in batch:
                await self._write([usage])
        except Exception:
            log.exception("usage of %d runs not stored: the store failed", len(batch))

    async def summary(
        self, who: Principal | None, group_by: UsageGroup, since: float, until: float | None = None
    ) -> UsageSummary:
        """The usage recorded in ``[since, until)`` that ``who`` may read, summed per ``group_by``.

        Args:
            who: The caller: its own runs' usage, or more as the access policy grants (``usage::*``).
            group_by: ``agent``, ``principal`` or ``model``.
            since: The range's start, seconds since the epoch (included).
            until: Its end (excluded); None: now.

        Raises:
            InvalidRequestError: the range ends before it starts, or holds more than ``max_records`` records.
        """
        await self.flush()  # the runs that ended here count, their writes under way or not
        until = time.time() if until is None else until
        if until < since:
            raise InvalidRequestError("until must not be earlier than since", "until")
        sums: dict[str | None, list[int]] = {}
        async for rec in self._records(self._access.filter(who, "read", USAGE), since, until):
            counted = sums.setdefault(_key(rec, group_by), [0, 0, 0])
            counted[0] += int(rec.body.get("input_tokens", 0))
            counted[1] += int(rec.body.get("output_tokens", 0))
            counted[2] += int(rec.body.get("turns", 0))
        rows = [
            UsageRow(key=key, input_tokens=i, output_tokens=o, total_tokens=i + o, turns=t)
            for key, (i, o, t) in sums.items()
        ]
        rows.sort(key=lambda row: (-row.total_tokens, row.key is None, row.key or ""))
        return UsageSummary(group_by=group_by, since=_utc(since), until=_utc(until), data=rows)

    async def _records(self, allow: Filter, since: float, until: float) -> AsyncIterator[Rec]:
        """The records of the range ``allow`` admits, a page at a time, at most ``max_records``."""
        after: str | None = None
        read = 0
        while True:
            query = ops.Page(USAGE, parent=None, allow=allow, since=since, until=until, after=after, limit=PAGE_SIZE)
            (page,) = await self._kernel.read([query])
            read += len(page.items)
            if read > self.max_records:
                raise InvalidRequestError(
                    f"the range holds more than {self.max_records} usage records (the setting usage.max_records):"
                    " ask for a narrower one with since and until",
                    "since",
                )
            for rec in page.items:
                yield rec
            if not page.has_more or not page.items:
                return
            after = page.items[-1].id


def _key(rec: Rec, group_by: UsageGroup) -> str | None:
    if group_by == "principal":
        return rec.owner.key if rec.owner is not None else None
    value = rec.body.get("agent_id" if group_by == "agent" else "model")
    return None if value is None else str(value)


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
