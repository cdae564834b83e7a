"""``ferryman schedules create|list|show|pause|resume|delete|runs``: cron schedules that start an agent's turns."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import TypeVar

from ferryman.api.schedules import Schedule, ScheduleRun
from ferryman.client import Client

from . import remote
from .remote import Output, UsageError, when

DEFAULT_SHOWN = 100
T = TypeVar("T")


def add_arguments(schedules: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman schedules`` to its parser."""
    actions = schedules.add_subparsers(dest="schedules_command", required=True)
    create = actions.add_parser("create", help="make a schedule that starts a turn of an agent at each tick")
    create.add_argument("agent_id", help="the agent")
    create.add_argument("cron", help="five cron fields, quoted ('0 9 * * 1-5'), or a macro such as @daily")
    create.add_argument("message", help="the user message of each turn")
    create.add_argument("--timezone", default="UTC", help="the IANA time zone cron is read in (default UTC)")
    create.add_argument("--session", help="a session every run continues (default: a fresh session each run)")
    create.add_argument("--paused", action="store_true", help="make it paused")
    create.set_defaults(handler=create_schedule)
    listing = actions.add_parser("list", help="list schedules, newest first")
    listing.add_argument("--agent", help="only this agent's")
    listing.add_argument(
        "--limit", type=int, default=DEFAULT_SHOWN, help=f"at most this many (default {DEFAULT_SHOWN})"
    )
    listing.set_defaults(handler=list_schedules)
    runs = actions.add_parser("runs", help="list a schedule's runs, newest first")
    runs.add_argument("schedule_id", help="the schedule")
    runs.add_argument("--limit", type=int, default=DEFAULT_SHOWN, help=f"at most this many (default {DEFAULT_SHOWN})")
    runs.set_defaults(handler=list_runs)
    parsers = [create, listing, runs]
    for name, help_text, handler in (
        ("show", "show a schedule", show_schedule),
        ("pause", "pause a schedule", pause_schedule),
        ("resume", "resume a schedule from its next tick", resume_schedule),
        ("delete", "delete a schedule and its runs", delete_schedule),
    ):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("schedule_id", help="the schedule")
        action.set_defaults(handler=handler)
        parsers.append(action)
    for parser in parsers:
        remote.add_flags(parser)


def create_schedule(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Make a schedule; print it."""
    schedule = client.schedules.create(
        args.agent_id, args.cron, args.message, timezone=args.timezone, session_id=args.session, paused=args.paused
    )
    _show(schedule, out)
    return 0


def show_schedule(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print one schedule."""
    _show(client.schedules.retrieve(args.schedule_id), out)
    return 0


def pause_schedule(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Pause a schedule."""
    _show(client.schedules.pause(args.schedule_id), out)
    return 0


def resume_schedule(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Resume a schedule."""
    _show(client.schedules.resume(args.schedule_id), out)
    return 0


def delete_schedule(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Delete a schedule."""
    deleted = client.schedules.delete(args.schedule_id)
    out.result(deleted, f"deleted schedule {deleted.id}")
    return 0


def list_schedules(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the schedules the caller may read."""
    found = _first(client.schedules.list(agent_id=args.agent, limit=min(_limit(args), 100)), args.limit)
    if out.as_json:
        out.document(found)
    elif not found:
        out.note("no schedules")
    else:
        rows = ((s.id, s.agent_id, s.cron, s.timezone, _next(s), s.session_id or "(fresh)") for s in found)
        out.table(("schedule", "agent", "cron", "timezone", "next run (UTC)", "session"), rows)
    return 0


def list_runs(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print a schedule's runs."""
    found: list[ScheduleRun] = _first(client.schedules.runs(args.schedule_id, limit=min(_limit(args), 100)), args.limit)
    if out.as_json:
        out.document(found)
    elif not found:
        out.note("no runs")
    else:
        rows = ((when(r.scheduled_at), when(r.created_at), r.status, r.session_id or "", r.turn_id or "",
                 r.error or "") for r in found)  # fmt: skip
        out.table(("tick (UTC)", "fired (UTC)", "status", "session", "turn", "error"), rows)
    return 0


def _show(schedule: Schedule, out: Output) -> None:
    if out.as_json:
        out.document(schedule)
        return
    out.fields(
        (
            ("schedule", schedule.id),
            ("agent", schedule.agent_id),
            ("cron", f"{schedule.cron} ({schedule.timezone})"),
            ("message", schedule.message),
            ("session", schedule.session_id or "(a fresh one each run)"),
            ("next run (UTC)", _next(schedule)),
            ("last run (UTC)", when(schedule.last_run_at) or "(none yet)"),
        )
    )


def _next(schedule: Schedule) -> str:
    return "(paused)" if schedule.paused else when(schedule.next_run_at)


def _limit(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    return int(args.limit)


def _first(items: Iterable[T], most: int) -> list[T]:
    found: list[T] = []
    for item in items:
        found.append(item)
        if len(found) >= most:
            break
    return found
