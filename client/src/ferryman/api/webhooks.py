"""Webhooks' models: the URL a run may name, the event ferryman posts when it ends, and its deliveries.

A turn, a resume or a response names ``webhook`` in its request body; when the run
ends, the server posts a :class:`WebhookEvent` there, signed per the Standard
Webhooks specification, and records each attempt on a :class:`WebhookDelivery`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel

from .limits import AtMost

MAX_WEBHOOK_URL_CHARS = 2048
"""The longest ``webhook`` URL a request may name."""

WebhookUrl = Annotated[str, AtMost(MAX_WEBHOOK_URL_CHARS)]
"""An ``http(s)`` URL the server posts a run's end to (checked like every URL a caller makes the server reach)."""

WebhookEventType = Literal[
    "turn.completed",
    "turn.failed",
    "turn.awaiting_input",
    "response.completed",
    "response.failed",
    "response.cancelled",
]
WEBHOOK_EVENT_TYPES: tuple[str, ...] = get_args(WebhookEventType)
DeliveryStatus = Literal["pending", "delivered", "failed"]
DELIVERY_STATUSES: tuple[str, ...] = get_args(DeliveryStatus)


class WebhookEvent(BaseModel):
    """The body of a webhook's POST (Standard Webhooks' payload shape).

    The request's ``webhook-id`` header is the delivery's id (the same on every retry: receivers dedupe by it).
    """

    type: WebhookEventType
    timestamp: str
    """When the run ended (ISO 8601, UTC)."""
    data: dict[str, Any]
    """The final turn (Agents API) or response (Responses API), as ``GET`` renders it."""


class WebhookAttempt(BaseModel):
    """One attempt to deliver an event."""

    at: float
    """When it was made (seconds since the epoch)."""
    status_code: int | None = None
    """What the receiver answered (None: no answer: refused, unreachable or too slow)."""
    error: str | None = None
    """Why it failed (None: it succeeded)."""


class WebhookDelivery(BaseModel):
    """One event on its way to a run's webhook, with every attempt made so far."""

    id: str
    """The delivery's id, also the event's ``webhook-id``."""
    object: Literal["webhook_delivery"] = "webhook_delivery"
    type: WebhookEventType
    url: str
    """The webhook, without user info, query or fragment (they may hold credentials)."""
    run_id: str
    """The turn's or the response's id."""
    status: DeliveryStatus
    """``pending`` (not delivered yet: another attempt follows), ``delivered``, or ``failed`` (given up)."""
    attempts: list[WebhookAttempt]
    created_at: float
    """When the run ended and the event was queued (seconds since the epoch)."""
    next_attempt_at: float | None = None
    """When the next attempt is due (pending deliveries only)."""
    delivered_at: float | None = None


class WebhookDeliveryList(BaseModel):
    """One page of webhook deliveries."""

    object: Literal["list"] = "list"
    data: list[WebhookDelivery]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False
