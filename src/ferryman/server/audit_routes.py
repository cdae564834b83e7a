"""``GET /v1/audit``: the audit records (creates, deletes, denials) the caller may read, newest first.

With authentication off it is open, like every route, and lists every record. With it on, a
caller lists the records it made (it owns them); a rule permitting ``read`` on ``audit::*``
lets an operator list everyone's, refusals of unauthenticated requests included.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.audit import AuditRecordList
from ferryman.api.limits import Id
from ferryman.auth.principal import current_principal

from .contract import Endpoint, Param
from .http import JSONModelResponse, cursor_paging, query_instant, services

MAX_PAGE = 100


async def list_audit(request: Request) -> Response:
    """One page of audit records, filtered."""
    after, limit, order = cursor_paging(request, "desc", MAX_PAGE)
    query = request.query_params
    listing = await services(request).audit.list(
        current_principal.get(),
        principal=query.get("principal") or None,
        action=query.get("action") or None,
        resource=query.get("resource") or None,
        outcome=query.get("outcome") or None,
        since=query_instant(request, "since"),
        after=after,
        limit=limit,
        order=order,
    )
    return JSONModelResponse(listing)


_LIST = (
    Param("principal", Id, "Only the records of this principal (``key:NAME`` or ``sub:ID``)."),
    Param("action", Literal["create", "read", "update", "delete"], "Only the records of this action."),
    Param("resource", Id, "Only the records of this resource (``type::id``; control characters escaped)."),
    Param("outcome", Literal["allowed", "denied"], "Only what was allowed, or only what was denied."),
    Param("since", str, "Only records from this instant on: ISO 8601 (UTC unless it says otherwise) or "
          "seconds since the epoch."),
    Param("after", Id, "The cursor: the ``last_id`` of the previous page."),
    Param("limit", Annotated[int, Field(ge=1, le=MAX_PAGE)], "Most records on the page (default 20)."),
    Param("order", Literal["asc", "desc"], "Oldest (asc) or newest (desc, the default) first."),
)  # fmt: skip

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("GET", "/audit", list_audit, "List audit records", "Audit", response=AuditRecordList,
             errors=(400, 404), query=_LIST),
)  # fmt: skip
"""Ferryman's own audit API."""
