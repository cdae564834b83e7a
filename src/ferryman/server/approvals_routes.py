"""``/v1/approvals`` (ferryman's own): the server tool calls waiting for a person, and their decisions.

Every call a paused turn or a response holds for approval, across the caller's
agents and responses, as far as the access policy lets it read them (with
authentication off: all). Approving or denying one continues the same turn, or
the response, on the server: the answer (202) comes before the run goes on.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.approvals import Approval, ApprovalList, DecideApprovalRequest
from ferryman.api.limits import Id
from ferryman.auth.principal import current_principal

from .contract import Endpoint, Param
from .http import JSONModelResponse, cursor_paging, parse_body, services

MAX_PAGE = 100


async def list_approvals(request: Request) -> Response:
    """One page of the server tool calls waiting for approval that the caller may read, newest first."""
    after, limit, order = cursor_paging(request, "desc", MAX_PAGE)
    query = request.query_params
    listing = await services(request).approvals.list(
        current_principal.get(),
        agent_id=query.get("agent_id") or None,
        source=query.get("source") or None,
        after=after,
        limit=limit,
        order=order,
    )
    return JSONModelResponse(listing)


async def _decide(request: Request, approve: bool) -> Response:
    body = await parse_body(request, DecideApprovalRequest)
    approval = await services(request).approvals.decide(
        current_principal.get(), request.path_params["approval_id"], approve, body.reason
    )
    return JSONModelResponse(approval, status_code=202)


async def approve(request: Request) -> Response:
    """Approve a waiting call: it runs with the arguments it was held with, and its turn or response goes on."""
    return await _decide(request, True)


async def deny(request: Request) -> Response:
    """Deny a waiting call: the model is told (with the reason), and its turn or response goes on."""
    return await _decide(request, False)


_LIST = (
    Param("agent_id", Id, "Only the calls of this agent's turns."),
    Param("source", Literal["turn", "response"], "Only the calls of turns (Agents API) or of responses."),
    Param("after", Id, "The cursor: the ``last_id`` of the previous page."),
    Param("limit", Annotated[int, Field(ge=1, le=MAX_PAGE)], "Most approvals on the page (default 20)."),
    Param("order", Literal["asc", "desc"], "Oldest (asc) or newest (desc, the default) first."),
)
_TAG = "Approvals"
_DECIDE_ERRORS = (400, 403, 404, 409)

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("GET", "/approvals", list_approvals, "List the calls waiting for approval", _TAG,
             response=ApprovalList, query=_LIST, own=True),
    Endpoint("POST", "/approvals/{approval_id}/approve", approve, "Approve a waiting call", _TAG,
             DecideApprovalRequest, Approval, errors=_DECIDE_ERRORS, status=202, own=True),
    Endpoint("POST", "/approvals/{approval_id}/deny", deny, "Deny a waiting call", _TAG,
             DecideApprovalRequest, Approval, errors=_DECIDE_ERRORS, status=202, own=True),
)  # fmt: skip
"""Ferryman's approval inbox."""
