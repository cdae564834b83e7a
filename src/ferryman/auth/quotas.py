"""Quotas per principal: requests per minute, and turns running at once.

Requests are counted in a sliding window (the ``limits`` library's sliding
window counter); running turns hold a slot each from the moment they are
admitted until their run ends (a turn paused for client tools holds none).
In one process both are counted in memory; replicas sharing a Redis count
them there (:mod:`ferryman.coordination.redis_quotas`), so a principal's quota
is one across every replica.

Quotas apply to authenticated principals only: with no principal (no
authentication configured, or the server's own work) nothing is counted, so a
loopback server without auth behaves as it always did.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Protocol

from limits import RateLimitItemPerMinute
from limits.aio.storage import MemoryStorage, Storage
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from ferryman.errors import RateLimitedError
from ferryman.metrics import instruments as metrics
from ferryman.quota_settings import QuotaLimits, QuotaSettings

from .principal import Principal, current_principal

TURN_RETRY_SECONDS = 2
"""``Retry-After`` of a turn refused for the running-turn quota: nobody knows when a turn ends."""


class TurnSlots(Protocol):
    """Slots of running turns per principal, counted wherever the turns run."""

    async def open(self) -> None:
        """Connect (and start renewing the slots this process holds, where they expire)."""
        ...

    async def close(self) -> None:
        """Stop and disconnect."""
        ...

    async def take(self, principal_id: str, turn_id: str, limit: int) -> bool:
        """Take a slot for ``turn_id`` unless the principal holds ``limit`` already; whether it was taken.

        ``principal_id`` is the principal's qualified name (``key:NAME``, ``sub:ID``): one counter per namespace.
        """
        ...

    async def give_back(self, principal_id: str, turn_id: str) -> None:
        """Free the slot of ``turn_id``."""
        ...


class SharedCounters(Protocol):
    """Makes the counters that replicas share: request windows and running-turn slots.

    The server passes Redis's (:func:`ferryman.coordination.select.quota_counters_for`).
    """

    def __call__(self) -> tuple[Storage, TurnSlots]:
        """Request windows (``limits`` storage) and running-turn slots, one pair per process."""
        ...


class MemoryTurnSlots:
    """Slots counted in this process: all of its turns run here."""

    def __init__(self) -> None:
        self._held: defaultdict[str, set[str]] = defaultdict(set)

    async def open(self) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Nothing to release."""

    async def take(self, principal_id: str, turn_id: str, limit: int) -> bool:
        """Take a slot if fewer than ``limit`` are held."""
        held = self._held[principal_id]
        if turn_id not in held and len(held) >= limit:
            return False
        held.add(turn_id)
        return True

    async def give_back(self, principal_id: str, turn_id: str) -> None:
        """Free the slot."""
        held = self._held.get(principal_id)
        if held is not None:
            held.discard(turn_id)
            if not held:
                del self._held[principal_id]


class Quotas:
    """The quotas of every principal, enforced on the caller of the current request.

    Args:
        settings: The limits.
        windows: Where request counts live (``limits`` storage: memory, or Redis).
        slots: Where running turns are counted.
    """

    def __init__(
        self,
        settings: QuotaSettings | None = None,
        windows: Storage | None = None,
        slots: TurnSlots | None = None,
    ) -> None:
        self.settings = settings or QuotaSettings()
        self._windows = windows or MemoryStorage()
        self._limiter = SlidingWindowCounterRateLimiter(self._windows)
        self._slots = slots or MemoryTurnSlots()
        self._held: dict[str, HeldSlot] = {}  # turn id -> the slot this process took for it

    async def open(self) -> None:
        """Connect the counters."""
        await self._slots.open()

    async def close(self) -> None:
        """Disconnect the counters."""
        await self._slots.close()

    def _caller(self) -> tuple[Principal, QuotaLimits] | None:
        principal = current_principal.get()
        if principal is None:
            return None
        return principal, self.settings.limits_for(principal.values("roles"))

    async def count_request(self) -> None:
        """Count a request of the current caller.

        Raises:
            RateLimitedError: the caller used up its requests of the minute.
        """
        caller = self._caller()
        if caller is None or caller[1].requests_per_minute is None:
            return
        principal = caller[0]
        per_minute = caller[1].requests_per_minute
        item = RateLimitItemPerMinute(per_minute)
        if await self._limiter.hit(item, "requests", principal.qualified):
            return
        metrics.quota_refused("requests")
        reset_at, _ = await self._limiter.get_window_stats(item, "requests", principal.qualified)
        retry_after = max(1, math.ceil(reset_at - time.time()))
        raise RateLimitedError(f"rate limit reached: {per_minute} requests per minute", retry_after=retry_after)

    async def admit_turn(self, turn_id: str) -> HeldSlot | None:
        """Take one of the current caller's running-turn slots for ``turn_id``, or share the one this process took
        for it already (a resume racing another of the same turn). Each admission given a slot ends with
        :meth:`turn_launched` or :meth:`turn_refused`; the slot is freed by :meth:`turn_ended`, or by the last
        refusal when no admission launched the turn.

        Returns:
            The slot this admission holds (None: nothing is counted).

        Raises:
            RateLimitedError: the caller runs as many turns as it may.
        """
        held = self._held.get(turn_id)
        if held is not None:
            held.admissions += 1
            return held
        caller = self._caller()
        if caller is None or caller[1].max_running_turns is None:
            return None
        principal, most = caller[0], caller[1].max_running_turns
        if not await self._slots.take(principal.qualified, turn_id, most):
            metrics.quota_refused("running_turns")
            raise RateLimitedError(
                f"too many running turns: at most {most} at once; retry when one ends",
                retry_after=TURN_RETRY_SECONDS,
            )
        held = self._held.get(turn_id)
        if held is not None:  # a racing admission took it while this one waited: share theirs
            held.admissions += 1
            return held
        held = self._held[turn_id] = HeldSlot(principal.qualified)
        return held

    def turn_launched(self, turn_id: str, held: HeldSlot) -> None:
        """An admission launched its turn: the slot is the run's now, freed when it ends (:meth:`turn_ended`)."""
        if self._held.get(turn_id) is held:  # else the run ended already, and a later admission holds another
            held.admissions -= 1
            held.launched = True

    async def turn_refused(self, turn_id: str, held: HeldSlot) -> None:
        """An admission failed before launching its turn: the slot is freed unless another admission of the turn
        still goes on or launched it."""
        if self._held.get(turn_id) is not held:  # freed already by the run another admission launched
            return
        held.admissions -= 1
        if held.admissions <= 0 and not held.launched:
            await self.turn_ended(turn_id)

    async def turn_ended(self, turn_id: str) -> None:
        """Free the slot taken for ``turn_id`` (nothing if none was)."""
        held = self._held.pop(turn_id, None)
        if held is not None:
            await self._slots.give_back(held.principal_id, turn_id)


@dataclass
class HeldSlot:
    """A running-turn slot this process took: whose, how many admissions share it, and whether one launched."""

    principal_id: str
    admissions: int = 1
    launched: bool = False


def quotas_for(settings: QuotaSettings, shared: SharedCounters | None = None) -> Quotas:
    """Quotas counted in the counters replicas share (``shared`` makes them), else in memory.

    ``shared`` is called only when some principal has a limit (with none, nothing is counted).
    """
    if shared is None or not settings.limits_anything():
        return Quotas(settings)
    windows, slots = shared()
    return Quotas(settings, windows, slots)
