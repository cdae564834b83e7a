"""``ferryman agents list|show|create|delete`` and ``ferryman sessions list|show|fork``."""

from __future__ import annotations

import argparse
from typing import Any

from rich.text import Text

from ferryman.api.agents import Agent, Session
from ferryman.api.content import content_to_text
from ferryman.client import Client

from . import ids, remote
from .remote import Output, when


def add_agents(agents: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman agents`` to its parser."""
    actions = agents.add_subparsers(dest="agents_command", required=True)
    listing = actions.add_parser("list", help="list agents")
    listing.set_defaults(handler=list_agents)
    show = actions.add_parser("show", help="show an agent's configuration")
    show.add_argument("agent_id", help="the agent's id, or a prefix of it")
    show.set_defaults(handler=show_agent)
    create = actions.add_parser("create", help="create an agent and print its id")
    create.add_argument("--model", required=True)
    create.add_argument("--instructions", default="You are a helpful assistant.")
    create.add_argument("--name")
    create.add_argument("--toolgroup", action="append", default=[], help="a toolgroup id (repeatable)")
    create.add_argument("--max-infer-iters", type=int, default=10)
    create.set_defaults(handler=create_agent)
    delete = actions.add_parser("delete", help="delete an agent (its sessions and turns too)")
    delete.add_argument("agent_id", help="the agent's id, or a prefix of it")
    delete.set_defaults(handler=delete_agent)
    for action in (listing, show, create, delete):
        remote.add_flags(action)


def add_sessions(sessions: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman sessions`` to its parser."""
    session_actions = sessions.add_subparsers(dest="sessions_command", required=True)
    session_list = session_actions.add_parser("list", help="list an agent's sessions")
    session_list.add_argument("agent_id", help="the agent's id, or a prefix of it")
    session_list.set_defaults(handler=list_sessions)
    session_show = session_actions.add_parser("show", help="show a session and its turns")
    session_show.add_argument("agent_id", help="the agent's id, or a prefix of it")
    session_show.add_argument("session_id", help="the session's id, or a prefix of it")
    session_show.set_defaults(handler=show_session)
    session_fork = session_actions.add_parser(
        "fork", help="make a new session sharing a session's turns up to and including one; print its id"
    )
    session_fork.add_argument("agent_id", help="the agent's id, or a prefix of it")
    session_fork.add_argument("session_id", help="the session's id, or a prefix of it")
    session_fork.add_argument("turn_id", help="the last turn the fork keeps (its id, or a prefix of it)")
    session_fork.add_argument("--name", help="the fork's name (default: the original's)")
    session_fork.set_defaults(handler=fork_session)
    for action in (session_list, session_show, session_fork):
        remote.add_flags(action)


def list_agents(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the agents."""
    agents = list(client.agents.list())
    if out.as_json:
        out.document(agents)
        return 0
    rows = ((a.agent_id, a.agent_config.name, a.agent_config.model, when(a.created_at)) for a in agents)
    out.table(("id", "name", "model", "created"), rows)
    return 0


def show_agent(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print an agent's configuration."""
    agent = client.agents.retrieve(ids.agent(client, args.agent_id))
    if out.as_json:
        out.document(agent)
    else:
        out.fields(_agent_fields(agent))
    return 0


def create_agent(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Create an agent and print its id."""
    config = {
        "model": args.model,
        "instructions": args.instructions,
        "name": args.name,
        "toolgroups": args.toolgroup,
        "max_infer_iters": args.max_infer_iters,
    }
    created = client.agents.create(agent_config=config)
    out.result({"agent_id": created.agent_id}, created.agent_id)
    return 0


def delete_agent(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Delete an agent."""
    agent_id = ids.agent(client, args.agent_id)
    client.agents.delete(agent_id)
    out.result({"agent_id": agent_id, "deleted": True}, f"deleted agent {agent_id}")
    return 0


def list_sessions(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print an agent's sessions."""
    sessions = list(client.agents.sessions.list(ids.agent(client, args.agent_id)))
    if out.as_json:
        out.document(sessions)
        return 0
    rows = ((s.session_id, s.session_name, len(s.turns), when(s.started_at)) for s in sessions)
    out.table(("id", "name", "turns", "started"), rows)
    return 0


def show_session(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print a session and a line per turn."""
    session = client.agents.sessions.retrieve(*ids.agent_session(client, args.agent_id, args.session_id))
    if out.as_json:
        out.document(session)
        return 0
    out.fields((("session", session.session_id), ("name", session.session_name), ("started", when(session.started_at))))
    out.table(("turn", "status", "started", "steps", "answer"), _turn_rows(session), title="turns")
    return 0


def fork_session(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Fork a session at a turn and print the new session's id."""
    agent_id, session_id = ids.agent_session(client, args.agent_id, args.session_id)
    turn_id = ids.turn(client, agent_id, session_id, args.turn_id)
    forked = client.agents.sessions.fork(agent_id, session_id, turn_id=turn_id, session_name=args.name)
    out.result({"session_id": forked.session_id, "forked_from": session_id, "turn_id": turn_id}, forked.session_id)
    return 0


def _agent_fields(agent: Agent) -> list[tuple[str, Any]]:
    config = agent.agent_config
    toolgroups = [group if isinstance(group, str) else group.name for group in config.toolgroups or []]
    client_tools = [tool.name for tool in config.client_tools or []]
    return [
        ("agent", agent.agent_id),
        ("name", config.name),
        ("model", config.model),
        ("created", when(agent.created_at)),
        ("instructions", Text(config.instructions)),
        ("toolgroups", ", ".join(toolgroups)),
        ("client tools", ", ".join(client_tools)),
        ("max inferences", config.max_infer_iters),
    ]


def _turn_rows(session: Session) -> list[tuple[Any, ...]]:
    rows = []
    for turn in session.turns:
        answer = " ".join(content_to_text(turn.output_message.content).split())
        rows.append((turn.turn_id, turn.status, when(turn.started_at), len(turn.steps), Text(answer)))
    return rows
