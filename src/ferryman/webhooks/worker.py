"""The webhook worker: each replica claims the deliveries due, posts them, and records every attempt.

It looks for deliveries due every ``webhooks.poll_seconds``, at once when a run
of this replica queued one (:meth:`WebhookWorker.wake`), and when the next retry
it scheduled falls due. Each delivery is posted by the one replica that claimed
it (see :mod:`.outbox`); one that fails is tried again after a backoff that
doubles each time, ``webhooks.max_attempts`` times at most. Stopping hands the
deliveries in flight back, due at once, for the next process or another replica.
It also claims the runs armed ``webhooks.recheck_seconds`` ago whose end queued
nothing yet (see :mod:`.outbox`), and has their façade queue it (or look again later).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ferryman.api.webhooks import WebhookAttempt
from ferryman.periodic import Periodic
from ferryman.safe_fetch import FetchPolicy
from ferryman.webhook_settings import WebhookSettings

from .outbox import ArmedRun, Claimed, Outbox
from .sender import post
from .signing import signed_headers, webhook_secret

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

SWEEP_SECONDS = 3600.0
"""How often a replica deletes the deliveries older than ``webhooks.retention_days``."""
SWEEP_BATCH = 500
"""The most deliveries one write of the sweep deletes."""
SECONDS_PER_DAY = 86_400


class WebhookWorker:
    """Delivers the outbox's events from this process.

    Args:
        outbox: The deliveries.
        settings: The ``webhooks:`` settings.
        policy: What a webhook's URL may reach (``fetch.allowed_hosts``).
        recover: Queues the end of an armed run that ended without queueing it; whether it is settled (False:
            the run goes on, look again later).
    """

    def __init__(
        self,
        outbox: Outbox,
        settings: WebhookSettings,
        policy: FetchPolicy,
        recover: Callable[[ArmedRun], Awaitable[bool]] | None = None,
    ) -> None:
        self._outbox = outbox
        self._recover = recover
        self.settings = settings
        self._policy = policy
        self._secret = ""
        self._client: httpx.AsyncClient | None = None
        self._sending: dict[str, asyncio.Task[None]] = {}
        self._due: float | None = None
        self._claims = Periodic("webhooks", self._claim, self._next_wait)
        self._sweeps = Periodic("webhooks-sweep", self._sweep, SWEEP_SECONDS)
        self.recorded = asyncio.Event()
        """Set each time an attempt's outcome is stored (clear it, then wait: the next one)."""
        self.swept = asyncio.Event()
        """Set each time the sweep of old deliveries ran."""

    def wake(self) -> None:
        """Look for deliveries now (one was just queued)."""
        self._claims.wake()

    async def start(self) -> None:
        """Read (or make, in the store) the signing secret and deliver in the background.

        Raises:
            ConfigurationError: the secret is malformed.
        """
        self._secret = await webhook_secret(self.settings, self._outbox.kernel)
        self._claims.start()
        self._sweeps.start()

    async def stop(self) -> None:
        """Stop claiming; deliveries in flight are cancelled and handed back, due at once."""
        await self._claims.stop()
        await self._sweeps.stop()
        tasks = list(self._sending.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._sending.clear()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _http(self) -> httpx.AsyncClient:
        """The client deliveries are posted with, made by the first one: its TLS context (the CA bundle read, about
        1 MiB) and httpx itself are not held by a server that delivers nothing."""
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(
                trust_env=False, follow_redirects=False, timeout=self.settings.timeout_seconds
            )
        return self._client

    def _hold_seconds(self) -> float:
        """How long a claim lasts: an attempt's time, and as long again to record it."""
        return 2 * self.settings.timeout_seconds + 5.0

    def _next_wait(self) -> float:
        """Seconds until the next look: ``webhooks.poll_seconds``, or less when a retry falls due sooner."""
        if self._due is None:
            return self.settings.poll_seconds
        return max(0.0, min(self.settings.poll_seconds, self._due - time.time()))

    async def _claim(self) -> None:
        """Claim the deliveries due, as many as free slots (a failure: logged, tried again at the next look)."""
        now = time.time()
        if self._due is not None and self._due <= now:
            # Cleared even when every slot is busy: a past due would make the loop wait 0 s, spinning. A
            # delivery that finishes wakes the loop, and this claim then finds the retry due.
            self._due = None
        free = self.settings.concurrency - len(self._sending)
        if free <= 0:
            return
        for claimed in await self._outbox.claim(now, self._hold_seconds(), free):
            task = asyncio.create_task(self._deliver(claimed), name=f"webhook-{claimed.delivery.id}")
            self._sending[claimed.delivery.id] = task
        if self._recover is not None:
            for run in await self._outbox.claim_armed(now, self._hold_seconds(), free):
                await self._recovered(run, self._recover)

    async def _recovered(self, run: ArmedRun, recover: Callable[[ArmedRun], Awaitable[bool]]) -> None:
        """Queue an armed run's end if it ended without (or look again later); its arm's lease lapses on error."""
        try:
            if await recover(run):
                await self._outbox.disarm(run)
            else:
                await self._outbox.rearm(run, time.time() + self.settings.recheck_seconds)
        except Exception:
            log.exception("webhook of %s %s: checking its run's end failed", run.kind, run.run_id)

    async def _sweep(self) -> None:
        """Delete the deliveries older than ``webhooks.retention_days`` (a failure: logged, tried again next hour)."""
        cutoff = time.time() - self.settings.retention_days * SECONDS_PER_DAY
        try:
            while await self._outbox.sweep(cutoff, SWEEP_BATCH) == SWEEP_BATCH:
                pass
        finally:
            self.swept.set()

    async def _deliver(self, claimed: Claimed) -> None:
        delivery = claimed.delivery
        try:
            limit = self.settings.max_attempts
            if delivery.claims >= limit:  # every claim so far ended without an outcome, or with a failure
                error = f"{limit} attempts (the setting webhooks.max_attempts) ended, some with no outcome recorded"
                attempt, failures, give_up = WebhookAttempt(at=time.time(), error=error), limit, True
            else:
                await self._outbox.count_claim(claimed)
                headers = signed_headers(self._secret, delivery.id, delivery.payload, time.time())
                timeout = self.settings.timeout_seconds
                attempt = await post(self._http(), delivery.target, delivery.payload, headers, self._policy, timeout)
                failures = sum(1 for earlier in delivery.attempts if earlier.error is not None)
                failures += attempt.error is not None
                give_up = failures >= limit
            next_at = None if attempt.error is None or give_up else time.time() + self.settings.backoff(failures)
            if not await self._outbox.settle(claimed, attempt, next_at, give_up):
                log.warning("webhook delivery %s: its claim lapsed; another replica holds it", delivery.id)
            elif attempt.error is not None:
                log.info("webhook delivery %s failed (attempt %d): %s", delivery.id, failures, attempt.error)
            if next_at is not None:
                self._due = next_at if self._due is None else min(self._due, next_at)
            self.recorded.set()
        except asyncio.CancelledError:
            await asyncio.shield(self._released(claimed))
            raise
        except Exception:  # the claim lapses; the delivery is tried again then
            log.exception("webhook delivery %s: recording its attempt failed", delivery.id)
        finally:
            self._sending.pop(delivery.id, None)
            self._claims.wake()

    async def _released(self, claimed: Claimed) -> None:
        try:
            await self._outbox.release(claimed)
        except Exception:  # its lease lapses instead
            log.exception("webhook delivery %s not handed back", claimed.delivery.id)
