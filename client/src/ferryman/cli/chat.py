"""``ferryman chat``: talk to an agent on a running server, its steps and tool calls shown as they happen."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from typing import Any, get_args

from ferryman.api.agents import MultitaskStrategy
from ferryman.client import APIConnectionError, Client, EventLogger
from ferryman.client.events import AgentEvent, TurnAwaitingInput, TurnCompleted, TurnFailed, from_server

from . import ids, remote
from .remote import Output, UsageError

_WAIT_STEP = 0.2
"""Seconds between two tries while ``--wait`` waits for the server."""
READ_TIMEOUT = 600.0
"""Seconds a turn's stream may stay silent: a local model on a slow machine may think long before its first token."""


def add_arguments(chat: argparse.ArgumentParser) -> None:
    """Add the arguments of ``ferryman chat`` to its parser."""
    chat.add_argument("message", nargs="?", help="one message to send; without it, read messages from stdin")
    chat.add_argument("--agent", help="an existing agent's id, or its prefix (default: create one)")
    chat.add_argument("--session", help="an existing session of that agent, or its id's prefix (default: create one)")
    chat.add_argument("--model", help="model of a new agent (default: the first model the server lists)")
    chat.add_argument("--instructions", default="You are a helpful assistant. Answer briefly.")
    chat.add_argument("--toolgroup", action="append", default=[], help="a toolgroup of a new agent (repeatable)")
    chat.add_argument("--max-tokens", type=int, default=256)
    chat.add_argument(
        "--multitask-strategy",
        choices=get_args(MultitaskStrategy),
        help="what each message's turn does while another runs in the session (default: the server's, reject)",
    )
    chat.add_argument(
        "--webhook", metavar="URL", help="where the server posts each turn's end, signed (see docs/apis/webhooks.md)"
    )
    chat.add_argument(
        "--wait", type=float, default=0.0, metavar="SECONDS", help="seconds to wait for the server to come up"
    )
    remote.add_flags(chat, read_timeout=READ_TIMEOUT)
    chat.set_defaults(handler=run)


def run(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Stream a turn per message (one argument, or lines of stdin) in one session; 1 if a turn failed."""
    _wait_until_up(client, args.wait, out)
    agent_id, model = _agent(client, args)
    if args.session:
        session_id = ids.session(client, agent_id, args.session)
    else:
        session_id = client.agents.sessions.create(agent_id, session_name="chat").session_id
    if not out.as_json:  # the document holds both ids; stderr stays for errors
        out.note(f"[{model} · agent {agent_id[:8]} · session {session_id[:8]}]")
    messages: Iterable[str] = [args.message] if args.message else (line.strip() for line in sys.stdin)
    logger = None if out.as_json else EventLogger(console=out.console)
    turns = []
    for text in messages:
        if text:
            turns.append(_turn(client, agent_id, session_id, text, logger, args.multitask_strategy, args.webhook))
    if out.as_json:
        out.document({"agent_id": agent_id, "session_id": session_id, "turns": turns})
    failed = [turn["error"] for turn in turns if turn["status"] == "failed"]
    for error in failed:
        print(f"error: {error['code']}: {' '.join(error['message'].split())}", file=sys.stderr)
    return remote.EXIT_API_ERROR if failed else 0


def _turn(
    client: Client,
    agent_id: str,
    session_id: str,
    text: str,
    logger: EventLogger | None,
    strategy: MultitaskStrategy | None,
    webhook: str | None,
) -> dict[str, Any]:
    """Stream one turn through the event logger; its id, status and answer (or error)."""
    message = {"role": "user", "content": text}
    ended = {"code": "interrupted", "message": "the turn's stream ended before the turn did"}
    outcome: dict[str, Any] = {"turn_id": None, "status": "failed", "output": None, "error": ended}
    stream = client.agents.turns.create(
        agent_id, session_id, messages=[message], stream=True, multitask_strategy=strategy, webhook=webhook
    )
    with stream:
        for event in from_server(stream):
            if logger is not None:
                logger.handle(event)
            _record(outcome, event)
    return outcome


def _record(outcome: dict[str, Any], event: AgentEvent) -> None:
    outcome["turn_id"] = event.turn_id or outcome["turn_id"]
    if isinstance(event, TurnCompleted):
        outcome.update(status="completed", output=event.output_text, error=None)
    elif isinstance(event, TurnAwaitingInput):
        outcome.update(status="awaiting_input", error=None)  # chat answers no client tool and grants no approval
    elif isinstance(event, TurnFailed):
        outcome.update(status="failed", error={"code": event.code, "message": event.message})


def _agent(client: Client, args: argparse.Namespace) -> tuple[str, str]:
    """The agent to talk to (``--agent``, or a new one) and its model."""
    if args.agent:
        agent_id = ids.agent(client, args.agent)
        return agent_id, client.agents.retrieve(agent_id).agent_config.model
    model = args.model or _first_model(client)
    config = {
        "model": model,
        "instructions": args.instructions,
        "toolgroups": args.toolgroup,
        "sampling_params": {"strategy": {"type": "greedy"}, "max_tokens": args.max_tokens},
    }
    return client.agents.create(agent_config=config).agent_id, model


def _first_model(client: Client) -> str:
    for model in client.models.list():
        if model.model_type == "llm":
            return model.identifier
    raise UsageError("the server lists no language model")


def _wait_until_up(client: Client, seconds: float, out: Output) -> None:
    """Return once the server answers, trying for up to ``seconds`` (then its connection error is raised).

    When the first try finds no server, a note on stderr says what is awaited, and where.
    """
    deadline = time.monotonic() + seconds
    told = False
    while True:
        try:
            client.models.list()
            return
        except APIConnectionError:
            if seconds > 0 and not told:
                url = str(client.base_url).rstrip("/")
                out.note(f"waiting for the server at {url} (up to {seconds:g} s)…{remote.exited_server(url)}")
                told = True
            if time.monotonic() >= deadline:
                raise
        time.sleep(_WAIT_STEP)
