"""Webhook deliveries: the events the server posted, or still posts, to runs' webhooks (``client.webhook_deliveries``).

A run names its webhook with ``webhook=`` in its request body (a turn, a resume or a response: pass it
through ``extra_body`` where a method has no argument for it).
"""

from __future__ import annotations

from ferryman.api.webhooks import WebhookDelivery, WebhookDeliveryList

from .._pagination import AsyncPage, SyncPage, by_cursor
from .._parsing import model
from .._transport import Call, RequestPlan, path
from ._base import AsyncResource, SyncResource

_DELIVERY = "/v1/webhook_deliveries/{}"


def _list(run_id: str | None, limit: int | None, order: str | None, after: str | None) -> RequestPlan:
    params = {"run_id": run_id, "limit": limit, "order": order, "after": after}
    return RequestPlan("GET", "/v1/webhook_deliveries", params=params)


def _retrieve(delivery_id: str) -> Call[WebhookDelivery]:
    return Call(RequestPlan("GET", path(_DELIVERY, delivery_id)), model(WebhookDelivery))


class WebhookDeliveries(SyncResource):
    """``client.webhook_deliveries``."""

    def list(self, *, run_id: str | None = None, limit: int | None = None, order: str | None = None,
             after: str | None = None) -> SyncPage[WebhookDelivery]:  # fmt: skip
        """The deliveries the caller may read, newest first, a page at a time (iterate for all of them).

        Args:
            run_id: Only those of this turn or response.
            limit: The most deliveries per page (at most 100).
            order: ``desc`` (newest first, the default) or ``asc``.
            after: Start after this delivery (a page's ``last_id``).
        """
        return SyncPage.fetch(self._transport, _list(run_id, limit, order, after), by_cursor(WebhookDeliveryList))

    def retrieve(self, delivery_id: str) -> WebhookDelivery:
        """One delivery, with its attempts."""
        return self._transport.call(_retrieve(delivery_id))


class AsyncWebhookDeliveries(AsyncResource):
    """``client.webhook_deliveries`` of an ``AsyncClient``."""

    async def list(self, *, run_id: str | None = None, limit: int | None = None, order: str | None = None,
                   after: str | None = None) -> AsyncPage[WebhookDelivery]:  # fmt: skip
        """The deliveries the caller may read (``async for`` over the page for all of them).

        Args: as :meth:`WebhookDeliveries.list`.
        """
        plan = _list(run_id, limit, order, after)
        return await AsyncPage.fetch(self._transport, plan, by_cursor(WebhookDeliveryList))

    async def retrieve(self, delivery_id: str) -> WebhookDelivery:
        """One delivery, with its attempts."""
        return await self._transport.call(_retrieve(delivery_id))
