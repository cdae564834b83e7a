"""The schedules API's models: a cron schedule that starts agent turns, its runs, and their lists."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from .limits import AtMost, Id, MessageText, NoControlCharacters, RequiredId

MAX_CRON_CHARS = 256
"""A cron expression's length (five fields; ranges and lists make it long, not much more)."""
MAX_TIMEZONE_CHARS = 64
"""An IANA time zone's name (the longest is about 30 characters)."""

ScheduleRunStatus = Literal["in_progress", "awaiting_input", "completed", "failed"]
SCHEDULE_RUN_STATUSES: tuple[str, ...] = ("in_progress", "awaiting_input", "completed", "failed")


class CreateScheduleRequest(BaseModel):
    """Body of ``POST /v1/schedules``."""

    agent_id: RequiredId
    """The agent whose turns the schedule starts."""
    cron: Annotated[str, Field(min_length=1), AtMost(MAX_CRON_CHARS), NoControlCharacters()]
    """When it fires: a five-field cron expression (minute, hour, day of month, month, day of week)."""
    timezone: Annotated[str, Field(min_length=1), AtMost(MAX_TIMEZONE_CHARS), NoControlCharacters()] = "UTC"
    """The IANA time zone the expression is read in (``Europe/Berlin``); ``UTC`` by default."""
    message: Annotated[MessageText, Field(min_length=1)]
    """The user message each run sends (bounded by ``schedules.max_message_chars``)."""
    session_id: Id | None = None
    """A session of the agent in which every run is a new turn; None: a fresh session for each run."""
    paused: bool = False
    """Create it paused (it fires once resumed)."""


class UpdateScheduleRequest(BaseModel):
    """Body of ``POST /v1/schedules/{schedule_id}``: pause or resume a schedule."""

    paused: bool
    """True pauses it (no run starts until resumed); False resumes a paused one from its next tick after now
    (an active one keeps its next tick). A resume by the owner also renews ``acts_until``."""


class Schedule(BaseModel):
    """A cron schedule that starts a turn of an agent, as its creator, at each tick."""

    id: str
    object: Literal["schedule"] = "schedule"
    created_at: int
    """Unix seconds."""
    agent_id: str
    cron: str
    timezone: str
    message: str
    session_id: str | None = None
    """The session every run continues; None: each run opens a fresh session."""
    paused: bool = False
    next_run_at: int | None = None
    """The next tick (Unix seconds); None while paused."""
    last_run_at: int | None = None
    """The tick of the latest run (Unix seconds); None before the first."""
    acts_until: int | None = None
    """When its owner is a signed-in subject (JWT, OIDC): until when (Unix seconds) its runs may act as that
    owner, with the attributes it had when it last made or resumed the schedule; the first tick after it fails
    and pauses the schedule, and the owner's resume renews it. None: no such end (an API key, checked at each
    tick, or the server itself)."""


class ScheduleList(BaseModel):
    """One page of schedules, newest first unless asked otherwise."""

    object: Literal["list"] = "list"
    data: list[Schedule]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class ScheduleDeleted(BaseModel):
    """Answer to a schedule's delete."""

    id: str
    object: Literal["schedule.deleted"] = "schedule.deleted"
    deleted: bool = True


class ScheduleRun(BaseModel):
    """One tick a schedule fired: the turn it started, or why none started."""

    id: str
    object: Literal["schedule.run"] = "schedule.run"
    schedule_id: str
    scheduled_at: int
    """The tick (Unix seconds)."""
    created_at: int
    """When it fired (Unix seconds): the tick, or later when no replica ran then."""
    session_id: str | None = None
    turn_id: str | None = None
    """The turn it started; None when none started (``error`` says why)."""
    status: ScheduleRunStatus = "in_progress"
    """The turn's status as last seen by the replica that started it; ``failed`` with no turn: none started."""
    error: str | None = None


class ScheduleRunList(BaseModel):
    """One page of a schedule's runs, newest first unless asked otherwise."""

    object: Literal["list"] = "list"
    data: list[ScheduleRun]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False
