"""``ferryman chat``: talk to an agent on a running server, streaming its answer."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
from httpx_sse import EventSource

DEFAULT_URL = "http://127.0.0.1:8321"


def add_parser(commands: Any) -> None:
    """Register the ``chat`` sub-command."""
    chat = commands.add_parser("chat", help="chat with an agent on a running server")
    chat.add_argument("message", nargs="?", help="one message to send; without it, read messages from stdin")
    chat.add_argument("--url", default=DEFAULT_URL, help=f"server URL (default {DEFAULT_URL})")
    chat.add_argument("--model", help="model id (default: the first model the server lists)")
    chat.add_argument("--instructions", default="You are a helpful assistant. Answer briefly.")
    chat.add_argument("--max-tokens", type=int, default=256)
    chat.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the server to come up")


def _wait_until_up(http: httpx.Client, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            http.get("/v1/health").raise_for_status()
            return
        except httpx.HTTPError:
            if time.monotonic() >= deadline:
                raise
        time.sleep(0.2)


def _first_model(http: httpx.Client) -> str:
    models = [m for m in http.get("/v1/models").json()["data"] if m.get("model_type", "llm") == "llm"]
    if not models:
        raise SystemExit("ferryman chat: the server lists no language model")
    return str(models[0]["identifier"])


def _events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for event in EventSource(response).iter_sse():
        yield event.json()


def _show(event: dict[str, Any]) -> None:
    if "error" in event:
        print(f"\n[error] {event['error'].get('message')}", file=sys.stderr)
        return
    payload = event["event"]["payload"]
    kind = payload["event_type"]
    if kind == "step_progress" and payload["delta"]["type"] == "text":
        print(payload["delta"]["text"], end="", flush=True)
    elif kind == "step_complete" and payload["step_type"] == "tool_execution":
        for response in payload["step_details"]["tool_responses"]:
            print(f"\n[tool {response['tool_name']}] {response['content']}", flush=True)
    elif kind == "turn_awaiting_input":
        calls = payload["turn"]["output_message"].get("tool_calls") or []
        print(f"\n[waiting for client tools: {', '.join(c['tool_name'] for c in calls)}]")
    elif kind == "turn_complete":
        print()


def _send(http: httpx.Client, path: str, text: str) -> None:
    body = {"messages": [{"role": "user", "content": text}], "stream": True}
    with http.stream("POST", path, json=body) as response:
        if response.status_code != 200:
            response.read()
            print(f"[error {response.status_code}] {response.text}", file=sys.stderr)
            return
        for event in _events(response):
            _show(event)


def run(args: argparse.Namespace) -> int:
    """Create an agent and a session, then stream a turn per message."""
    with httpx.Client(base_url=args.url, timeout=httpx.Timeout(10.0, read=600.0)) as http:
        _wait_until_up(http, args.wait)
        model = args.model or _first_model(http)
        config = {
            "model": model,
            "instructions": args.instructions,
            "sampling_params": {"strategy": {"type": "greedy"}, "max_tokens": args.max_tokens},
        }
        agent_id = http.post("/v1/agents", json={"agent_config": config}).json()["agent_id"]
        session = http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "chat"}).json()["session_id"]
        path = f"/v1/agents/{agent_id}/session/{session}/turn"
        print(f"[{model} · agent {agent_id[:8]} · session {session[:8]}]", file=sys.stderr)
        messages = [args.message] if args.message else (line.strip() for line in sys.stdin)
        for text in messages:
            if text:
                _send(http, path, text)
    return 0
