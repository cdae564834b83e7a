"""``GET /v1/webhook_deliveries``: the events posted (or still to post) to the webhooks of the caller's runs.

A delivery is owned by the caller of the run it tells of: under the default
policy a caller reads its own; one it may not read is missing to it (404).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.limits import Id
from ferryman.api.webhooks import WebhookDelivery, WebhookDeliveryList
from ferryman.auth.principal import current_principal

from .contract import Endpoint, Param
from .http import JSONModelResponse, cursor_paging, services

MAX_PAGE = 100
_TAG = "Webhooks"


async def list_deliveries(request: Request) -> Response:
    """One page of webhook deliveries."""
    after, limit, order = cursor_paging(request, "desc", MAX_PAGE)
    webhooks = services(request).webhooks
    run_id = request.query_params.get("run_id") or None
    listing = await webhooks.list(current_principal.get(), run_id=run_id, after=after, limit=limit, order=order)
    return JSONModelResponse(listing)


async def get_delivery(request: Request) -> Response:
    """One webhook delivery, with its attempts."""
    delivery_id = request.path_params["delivery_id"]
    return JSONModelResponse(await services(request).webhooks.get(current_principal.get(), delivery_id))


_LIST = (
    Param("run_id", Id, "Only the deliveries of this turn or response."),
    Param("after", Id, "The cursor: the ``last_id`` of the previous page."),
    Param("limit", Annotated[int, Field(ge=1, le=MAX_PAGE)], "Most deliveries on the page (default 20)."),
    Param("order", Literal["asc", "desc"], "Oldest (asc) or newest (desc, the default) first."),
)

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("GET", "/webhook_deliveries", list_deliveries, "List webhook deliveries", _TAG,
             response=WebhookDeliveryList, errors=(400, 404), query=_LIST),
    Endpoint("GET", "/webhook_deliveries/{delivery_id}", get_delivery, "Get a webhook delivery", _TAG,
             response=WebhookDelivery, errors=(404,)),
)  # fmt: skip
"""Ferryman's own webhook deliveries API."""
