"""The audit API's models: one audit record (a create, a delete or a denial) and a page of them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

AuditAction = Literal["create", "read", "update", "delete"]
AuditOutcome = Literal["allowed", "denied"]
AUDIT_ACTIONS: tuple[str, ...] = ("create", "read", "update", "delete")
AUDIT_OUTCOMES: tuple[str, ...] = ("allowed", "denied")


class AuditRecord(BaseModel):
    """What one caller did or was refused, as the server recorded it.

    Every text that came from a caller (an id, a path, a principal's name) is stored with its control
    characters escaped (a newline as ``\\n``), so a record reads as one line wherever it is shown.
    """

    id: str
    object: Literal["audit_record"] = "audit_record"
    created_at: float
    """When it happened (seconds since the epoch)."""
    request_id: str | None = None
    """The id of the HTTP request it happened in (its ``X-Request-ID``); None outside a request."""
    principal: str | None = None
    """Who acted, qualified: ``key:NAME`` (an API key) or ``sub:ID`` (a token's subject); None: unauthenticated."""
    event: str
    """What happened: ``create``, ``delete``, ``denied``, ``authentication_failed`` or ``rate_limited``."""
    action: AuditAction
    """What was asked for."""
    resource: str
    """The record, as ``type::id`` (the request's path for a refusal before any record is known: 401, 429)."""
    outcome: AuditOutcome
    status: int | None = None
    """The HTTP status a denial was answered with (401, 403, 404, 409, 429); None for what was allowed."""
    route: str | None = None
    """The template of the HTTP route it happened under (``/v1/agents/{agent_id}``), when known."""
    reason: str | None = None
    """Why authentication failed (never the credential)."""


class AuditRecordList(BaseModel):
    """One page of audit records, newest first.

    ``last_id`` is where the next page starts (``after``): the last record examined, which is the last of
    ``data`` unless a filtered page stopped at its scan bound (see the audit API's documentation).
    """

    object: Literal["list"] = "list"
    data: list[AuditRecord]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False
