"""Webhooks as the façades and the API use them: a run's webhook checked, its end queued, deliveries listed.

A turn, a resume or a response that names ``webhook`` has it checked when the
request arrives (:meth:`Webhooks.check`: 400 naming the problem); when the run's
outcome is stored, the façade hands its final state to :meth:`Webhooks.notify`,
which writes the delivery to the outbox (owned by the run's caller) and wakes this
replica's worker. Deliveries are read through the access policy like every owned
record: a caller lists its own, one it may not read is missing to it.

The webhook is also stored with the run, in its turn's ``overrides`` (:func:`keep_webhook`),
for what ends a run without the task that ran it: a replica failing a dead one's
run (the lease sweep) queues the same event, under the same delivery id, so that
whichever of the two is written first is the one delivery.

A run that names a webhook is armed when it starts (:meth:`Webhooks.arm`): a
process that dies after storing the run's outcome but before queueing its event
leaves the arm, and a replica later asks the run's façade (its
:attr:`Webhooks.recoverers` entry) to queue the end it finds stored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ferryman.api.webhooks import (
    WebhookDelivery,
    WebhookDeliveryList,
    WebhookEvent,
    WebhookEventType,
)
from ferryman.auth.principal import Principal
from ferryman.errors import NotFoundError
from ferryman.safe_fetch import FetchPolicy
from ferryman.storage.base import Store
from ferryman.storage.domain.kinds import WEBHOOK_DELIVERY
from ferryman.storage.kernel.filters import ALL
from ferryman.storage.kernel.protocol import Kernel
from ferryman.webhook_settings import WebhookSettings
from ferryman.webhooks.outbox import PENDING, ArmedRun, Outbox, StoredDelivery, delivery_id
from ferryman.webhooks.sender import check_url, shown_url
from ferryman.webhooks.worker import WebhookWorker

from .access import Access

log = logging.getLogger(__name__)

TURN_EVENTS: dict[str, WebhookEventType] = {
    "completed": "turn.completed",
    "failed": "turn.failed",
    "awaiting_input": "turn.awaiting_input",
}
"""The event a run of a turn ends with, by the turn's status then."""
RESPONSE_EVENTS: dict[str, WebhookEventType] = {
    "completed": "response.completed",
    "incomplete": "response.completed",  # its status says it stopped short (max_output_tokens)
    "failed": "response.failed",
    "cancelled": "response.cancelled",
}
"""The event a response ends with, by its status then."""
KEY = "webhook"
FORGET_BATCH = 200
"""The most deliveries one write deletes when their run is deleted."""
"""Where a turn's ``overrides`` keep the webhook of its current run."""


@dataclass(frozen=True)
class KeptWebhook:
    """The webhook a run's request named, as stored with the run.

    Attributes:
        url: The webhook.
        run_key: Names the run, as :meth:`Webhooks.notify` takes it.
    """

    url: str
    run_key: str


def keep_webhook(overrides: dict[str, Any], url: str | None, run_key: str) -> dict[str, Any]:
    """``overrides`` holding the webhook of the run ``run_key`` (none: without the webhook of an earlier run)."""
    kept = {name: value for name, value in overrides.items() if name != KEY}
    if url is not None:
        kept[KEY] = {"url": url, "run": run_key}
    return kept


def kept_webhook(overrides: dict[str, Any]) -> KeptWebhook | None:
    """The webhook stored with the turn's current run (None: it named none)."""
    found = overrides.get(KEY)
    if not isinstance(found, dict) or not isinstance(found.get("url"), str) or not isinstance(found.get("run"), str):
        return None
    return KeptWebhook(found["url"], found["run"])


async def stored_webhook(store: Store, session_id: str, turn_id: str) -> KeptWebhook | None:
    """The webhook stored with the turn's current run (None: it named none).

    Raises:
        NotFoundError: the turn is missing, or the caller may not read it.
    """
    return kept_webhook((await store.get_turn_record(session_id, turn_id)).overrides)


class Webhooks:
    """The outbox, its worker, and the deliveries as each caller may read them.

    Args:
        kernel: Where deliveries are stored.
        access: The access policy.
        policy: What a webhook's URL may reach (``fetch.allowed_hosts``).
        settings: The ``webhooks:`` settings.
    """

    def __init__(
        self, kernel: Kernel, access: Access, policy: FetchPolicy | None = None, settings: WebhookSettings | None = None
    ) -> None:
        self.settings = settings or WebhookSettings()
        self.outbox = Outbox(kernel)
        self._access = access
        self._policy = policy or FetchPolicy()
        self.worker = WebhookWorker(self.outbox, self.settings, self._policy, self._recover)
        self.recoverers: dict[str, Callable[[ArmedRun], Awaitable[bool]]] = {}
        """By an armed run's kind: queues the end of a run of that kind found ended with its event unqueued (and
        says so: False while the run goes on)."""

    async def arm(self, run: ArmedRun) -> None:
        """Arm ``run``'s delivery as it starts (never raises: a failure is logged, and only a crash in the moment
        after its outcome is stored would then lose its event)."""
        try:
            await self.outbox.arm(run, time.time() + self.settings.recheck_seconds)
        except Exception:
            log.exception("the webhook of %s %s was not armed", run.kind, run.run_id)

    async def _recover(self, run: ArmedRun) -> bool:
        recover = self.recoverers.get(run.kind)
        return False if recover is None else await recover(run)

    async def check(self, url: str | None) -> None:
        """Refuse a request whose ``webhook`` could not be delivered to (nothing to check without one).

        Raises:
            InvalidRequestError: the URL is malformed, does not resolve, or reaches an address
                ``fetch.allowed_hosts`` does not allow.
        """
        if url is not None:
            await check_url(url, self._policy, self.settings.timeout_seconds)

    async def notify(
        self,
        url: str,
        run_key: str,
        run_id: str,
        event: WebhookEventType,
        data: dict[str, Any],
        who: Principal | None,
    ) -> None:
        """Queue the event of a run's end for its webhook, owned by ``who`` (never raises: the run's outcome is
        stored already; a failure is logged).

        Args:
            url: The webhook.
            run_key: Names this run of the turn or response (a resume is a run of its own), once: the same run's
                end queued twice is one delivery.
            run_id: The turn's or response's id.
            event: The event's type.
            data: The final turn or response, as the API renders it.
            who: The run's caller (None: the server itself).
        """
        try:
            await self._queue(url, run_key, run_id, event, data, who)
        except Exception:
            log.exception("the %s webhook of %s was not queued", event, run_id)

    async def _queue(
        self, url: str, run_key: str, run_id: str, event: WebhookEventType, data: dict[str, Any], who: Principal | None
    ) -> None:
        now = time.time()
        moment = datetime.fromtimestamp(now, UTC).isoformat()
        body = WebhookEvent(type=event, timestamp=moment, data=data).model_dump_json()
        if len(body.encode()) > self.settings.max_payload_bytes:
            # Too large to post (webhooks.max_payload_bytes): the receiver is told the run ended, and reads it.
            thin = {"id": run_id, "status": data.get("status"), "data_omitted": True}
            body = WebhookEvent(type=event, timestamp=moment, data=thin).model_dump_json()
        delivery = StoredDelivery(
            id=delivery_id(run_key),
            type=event,
            url=shown_url(url),
            run_id=run_id,
            status=PENDING,
            attempts=[],
            created_at=now,
            next_attempt_at=now,
            target=url,
            payload=body,
            session_id=session if isinstance(session := data.get("session_id"), str) else None,
        )
        if await self.outbox.add(delivery, self._access.owner(who)):
            self.worker.wake()

    async def forget(self, *, run_id: str | None = None, session_id: str | None = None) -> None:
        """Delete the deliveries of a run, or of a session's turns, deleted with them (never raises: logged)."""
        try:
            if run_id is not None:
                await self.outbox.forget("run_id", run_id, FORGET_BATCH)
            if session_id is not None:
                await self.outbox.forget("session_id", session_id, FORGET_BATCH)
        except Exception:  # the retention sweep deletes them later
            log.exception("webhook deliveries of %s were not deleted", run_id or session_id)

    async def list(
        self, who: Principal | None, *, run_id: str | None = None, after: str | None = None, limit: int = 20,
        order: str = "desc",
    ) -> WebhookDeliveryList:  # fmt: skip
        """One page of the deliveries ``who`` may read, newest first unless ``order`` is ``asc``.

        Raises:
            NotFoundError: ``after`` names no delivery.
        """
        page = await self.outbox.records.page(
            allow=self._access.filter(who, "read", WEBHOOK_DELIVERY),
            where=("run_id", run_id) if run_id else None,
            after=after,
            limit=limit,
            desc=order != "asc",
        )
        data = [delivery.shown() for delivery in page.items]
        first, last = (data[0].id, data[-1].id) if data else (None, None)
        return WebhookDeliveryList(data=data, first_id=first, last_id=last, has_more=page.has_more)

    async def get(self, who: Principal | None, record_id: str) -> WebhookDelivery:
        """One delivery.

        Raises:
            NotFoundError: it is missing, or ``who`` may not read it.
        """
        allow = self._access.filter(who, "read", WEBHOOK_DELIVERY)
        found = await self.outbox.records.find(record_id, allow=allow)
        if found is None:
            if allow != ALL:  # missing or hidden: storage does not say which, audited as a denial either way
                self._access.denied(who, "read", WEBHOOK_DELIVERY, record_id, status=404)
            raise NotFoundError(f"webhook delivery '{record_id}' not found")
        return found.value.shown()

    async def start(self) -> None:
        """Deliver in the background (see :class:`~ferryman.webhooks.worker.WebhookWorker`)."""
        await self.worker.start()

    async def stop(self) -> None:
        """Stop delivering; what is not delivered stays in the outbox."""
        await self.worker.stop()
