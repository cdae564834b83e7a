"""Routes of the schedules API: cron schedules that start agent turns, and the runs they made."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.limits import Id
from ferryman.api.schedules import (
    CreateScheduleRequest,
    Schedule,
    ScheduleDeleted,
    ScheduleList,
    ScheduleRunList,
    UpdateScheduleRequest,
)
from ferryman.auth.principal import current_principal

from .contract import Endpoint, Param
from .http import JSONModelResponse, cursor_paging, parse_body, services
from .idempotent_routes import take_key

MAX_PAGE = 100


async def create_schedule(request: Request) -> Response:
    """Create a schedule, owned by the caller (its request's key claimed by the write that stores it)."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, CreateScheduleRequest)
    return JSONModelResponse(await services(request).schedules.create(current_principal.get(), body, key))


async def list_schedules(request: Request) -> Response:
    """One page of the caller's schedules (those it may read)."""
    after, limit, order = cursor_paging(request, "desc", MAX_PAGE)
    agent_id = request.query_params.get("agent_id") or None
    listing = await services(request).schedules.list(
        current_principal.get(), agent_id=agent_id, after=after, limit=limit, order=order
    )
    return JSONModelResponse(listing)


async def get_schedule(request: Request) -> Response:
    """One schedule."""
    schedule_id = request.path_params["schedule_id"]
    return JSONModelResponse(await services(request).schedules.get(current_principal.get(), schedule_id))


async def update_schedule(request: Request) -> Response:
    """Pause or resume a schedule."""
    body = await parse_body(request, UpdateScheduleRequest)
    schedule_id = request.path_params["schedule_id"]
    updated = await services(request).schedules.set_paused(current_principal.get(), schedule_id, body.paused)
    return JSONModelResponse(updated)


async def delete_schedule(request: Request) -> Response:
    """Delete a schedule and its runs."""
    schedule_id = request.path_params["schedule_id"]
    return JSONModelResponse(await services(request).schedules.delete(current_principal.get(), schedule_id))


async def list_schedule_runs(request: Request) -> Response:
    """One page of a schedule's runs."""
    after, limit, order = cursor_paging(request, "desc", MAX_PAGE)
    schedule_id = request.path_params["schedule_id"]
    listing = await services(request).schedules.runs(
        current_principal.get(), schedule_id, after=after, limit=limit, order=order
    )
    return JSONModelResponse(listing)


_PAGING = (
    Param("after", Id, "The cursor: the ``last_id`` of the previous page."),
    Param("limit", Annotated[int, Field(ge=1, le=MAX_PAGE)], "Most items on the page (default 20)."),
    Param("order", Literal["asc", "desc"], "Oldest (asc) or newest (desc, the default) first."),
)
_EXAMPLE = {"agent_id": "AGENT_ID", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin", "message": "Any news?"}

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("POST", "/schedules", create_schedule, "Create a schedule", "Schedules", body=CreateScheduleRequest,
             response=Schedule, errors=(400, 403, 404), creates=True, key_with_run=True, example=_EXAMPLE),
    Endpoint("GET", "/schedules", list_schedules, "List schedules", "Schedules", response=ScheduleList,
             errors=(400, 404), query=(Param("agent_id", Id, "Only the schedules of this agent."), *_PAGING)),
    Endpoint("GET", "/schedules/{schedule_id}", get_schedule, "Retrieve a schedule", "Schedules",
             response=Schedule, errors=(400, 404)),
    Endpoint("POST", "/schedules/{schedule_id}", update_schedule, "Pause or resume a schedule", "Schedules",
             body=UpdateScheduleRequest, response=Schedule, errors=(400, 403, 404), example={"paused": True}),
    Endpoint("DELETE", "/schedules/{schedule_id}", delete_schedule, "Delete a schedule and its runs", "Schedules",
             response=ScheduleDeleted, errors=(400, 403, 404)),
    Endpoint("GET", "/schedules/{schedule_id}/runs", list_schedule_runs, "List a schedule's runs", "Schedules",
             response=ScheduleRunList, errors=(400, 404), query=_PAGING),
)  # fmt: skip
"""Ferryman's own schedules API."""
