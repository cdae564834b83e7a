"""``ferryman turns show|replay``: a stored turn as a step timeline, or its events played again as they streamed."""

from __future__ import annotations

import argparse

from ferryman.client import Client, EventLogger
from ferryman.client.events import from_server

from . import ids, remote
from .remote import Output
from .timeline import timeline, timeline_table


def add_arguments(turns: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman turns`` to its parser."""
    actions = turns.add_subparsers(dest="turns_command", required=True)
    show = actions.add_parser("show", help="the turn's steps: type, start, duration, tool calls and results")
    show.set_defaults(handler=show_turn)
    replay = actions.add_parser("replay", help="the turn's stored events, printed as they streamed")
    replay.set_defaults(handler=replay_turn)
    for action in (show, replay):
        action.add_argument("agent_id", help="the agent's id, or a prefix of it")
        action.add_argument("session_id", help="the session's id, or a prefix of it")
        action.add_argument("turn_id", help="the turn's id, or a prefix of it")
        remote.add_flags(action)


def show_turn(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the turn's step timeline."""
    turn = client.agents.turns.retrieve(*_ids(client, args))
    if out.as_json:
        out.document(timeline(turn))
    else:
        out.console.print(timeline_table(turn))
    return 0


def replay_turn(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Replay the turn's events from its first (live, if it is still running), through the event logger.

    A turn that paused for input and was resumed replays whole: every run of it, its pauses included.
    """
    stream = client.agents.turns.events(*_ids(client, args), through_pauses=True)
    if out.as_json:
        with stream:
            out.document([event.data for event in stream])
        return 0
    logger = EventLogger(console=out.console)
    with stream:
        for event in from_server(stream):
            logger.handle(event)
    return 0


def _ids(client: Client, args: argparse.Namespace) -> tuple[str, str, str]:
    """The agent, session and turn ids, each given whole or by a prefix."""
    agent_id, session_id = ids.agent_session(client, args.agent_id, args.session_id)
    return agent_id, session_id, ids.turn(client, agent_id, session_id, args.turn_id)
