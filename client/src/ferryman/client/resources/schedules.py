"""The schedules API: cron schedules that start an agent's turns, and their runs (``client.schedules``)."""

from __future__ import annotations

from typing import Any

from ferryman.api.schedules import Schedule, ScheduleDeleted, ScheduleList, ScheduleRun, ScheduleRunList

from .._pagination import AsyncPage, SyncPage, by_cursor
from .._parsing import model
from .._transport import Call, RequestPlan, path
from ._base import AsyncResource, SyncResource, route_call

_SCHEDULE = "/v1/schedules/{}"


def _create(agent_id: str, cron: str, message: str, timezone: str, session_id: str | None,
            paused: bool) -> Call[Schedule]:  # fmt: skip
    body: dict[str, Any] = {"agent_id": agent_id, "cron": cron, "message": message, "timezone": timezone,
                            "paused": paused}  # fmt: skip
    if session_id is not None:
        body["session_id"] = session_id
    return Call(RequestPlan("POST", "/v1/schedules", json=body, idempotent=True), model(Schedule))


def _list(agent_id: str | None, limit: int | None, order: str | None, after: str | None) -> RequestPlan:
    params = {"agent_id": agent_id, "limit": limit, "order": order, "after": after}
    return RequestPlan("GET", "/v1/schedules", params=params)


def _runs(schedule_id: str, limit: int | None, order: str | None, after: str | None) -> RequestPlan:
    params = {"limit": limit, "order": order, "after": after}
    return RequestPlan("GET", path(_SCHEDULE + "/runs", schedule_id), params=params)


class Schedules(SyncResource):
    """``client.schedules``."""

    def create(self, agent_id: str, cron: str, message: str, *, timezone: str = "UTC",
               session_id: str | None = None, paused: bool = False) -> Schedule:  # fmt: skip
        """Make a schedule starting a turn of ``agent_id`` with ``message`` at each tick of ``cron``.

        Args:
            agent_id: The agent.
            cron: Five cron fields (minute hour day-of-month month day-of-week) or a macro (``@daily``).
            message: The user message of each turn.
            timezone: The IANA time zone ``cron`` is read in.
            session_id: A session every run continues (default: a fresh session per run).
            paused: Make it paused.
        """
        return self._transport.call(_create(agent_id, cron, message, timezone, session_id, paused))

    def retrieve(self, schedule_id: str) -> Schedule:
        """One schedule."""
        return self._transport.call(route_call("GET", _SCHEDULE, Schedule, schedule_id))

    def list(self, *, agent_id: str | None = None, limit: int | None = None, order: str | None = None,
             after: str | None = None) -> SyncPage[Schedule]:  # fmt: skip
        """The schedules the caller may read, newest first, a page at a time (iterate for all of them)."""
        return SyncPage.fetch(self._transport, _list(agent_id, limit, order, after), by_cursor(ScheduleList))

    def pause(self, schedule_id: str) -> Schedule:
        """Pause a schedule: no run starts until it is resumed."""
        return self._transport.call(route_call("POST", _SCHEDULE, Schedule, schedule_id, json={"paused": True}))

    def resume(self, schedule_id: str) -> Schedule:
        """Resume a schedule from its first tick after now."""
        return self._transport.call(route_call("POST", _SCHEDULE, Schedule, schedule_id, json={"paused": False}))

    def delete(self, schedule_id: str) -> ScheduleDeleted:
        """Delete a schedule and its runs (the turns they started stay)."""
        return self._transport.call(route_call("DELETE", _SCHEDULE, ScheduleDeleted, schedule_id))

    def runs(self, schedule_id: str, *, limit: int | None = None, order: str | None = None,
             after: str | None = None) -> SyncPage[ScheduleRun]:  # fmt: skip
        """A schedule's runs, newest first, a page at a time (iterate for all of them)."""
        return SyncPage.fetch(self._transport, _runs(schedule_id, limit, order, after), by_cursor(ScheduleRunList))


class AsyncSchedules(AsyncResource):
    """``client.schedules`` of an ``AsyncClient``."""

    async def create(self, agent_id: str, cron: str, message: str, *, timezone: str = "UTC",
                     session_id: str | None = None, paused: bool = False) -> Schedule:  # fmt: skip
        """Make a schedule (see :meth:`Schedules.create`)."""
        return await self._transport.call(_create(agent_id, cron, message, timezone, session_id, paused))

    async def retrieve(self, schedule_id: str) -> Schedule:
        """One schedule."""
        return await self._transport.call(route_call("GET", _SCHEDULE, Schedule, schedule_id))

    async def list(self, *, agent_id: str | None = None, limit: int | None = None, order: str | None = None,
                   after: str | None = None) -> AsyncPage[Schedule]:  # fmt: skip
        """The schedules the caller may read, newest first (``async for`` over the page for all of them)."""
        return await AsyncPage.fetch(self._transport, _list(agent_id, limit, order, after), by_cursor(ScheduleList))

    async def pause(self, schedule_id: str) -> Schedule:
        """Pause a schedule."""
        return await self._transport.call(route_call("POST", _SCHEDULE, Schedule, schedule_id, json={"paused": True}))

    async def resume(self, schedule_id: str) -> Schedule:
        """Resume a schedule from its first tick after now."""
        call = route_call("POST", _SCHEDULE, Schedule, schedule_id, json={"paused": False})
        return await self._transport.call(call)

    async def delete(self, schedule_id: str) -> ScheduleDeleted:
        """Delete a schedule and its runs."""
        return await self._transport.call(route_call("DELETE", _SCHEDULE, ScheduleDeleted, schedule_id))

    async def runs(self, schedule_id: str, *, limit: int | None = None, order: str | None = None,
                   after: str | None = None) -> AsyncPage[ScheduleRun]:  # fmt: skip
        """A schedule's runs, newest first (``async for`` over the page for all of them)."""
        plan = _runs(schedule_id, limit, order, after)
        return await AsyncPage.fetch(self._transport, plan, by_cursor(ScheduleRunList))
