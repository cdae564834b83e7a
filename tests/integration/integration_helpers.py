"""Helpers shared by the integration tests: URLs, SSE frames, waiting on turn state."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx

from sse import frames

T = TypeVar("T")

POLL_TIMEOUT = 15.0


def user(text: str) -> dict[str, Any]:
    """A user message."""
    return {"role": "user", "content": text}


def gate_name() -> str:
    """A gate name no other test uses."""
    return f"gate-{uuid.uuid4().hex}"


def session_url(agent_id: str, session_id: str, prefix: str = "/v1") -> str:
    """URL of a session."""
    return f"{prefix}/agents/{agent_id}/session/{session_id}"


def turn_url(agent_id: str, session_id: str, turn_id: str | None = None, prefix: str = "/v1") -> str:
    """URL to create turns in a session, or of one turn."""
    base = f"{session_url(agent_id, session_id, prefix)}/turn"
    return base if turn_id is None else f"{base}/{turn_id}"


def iter_frames(response: httpx.Response) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(id, data)`` for each SSE frame of a streaming response, as it arrives."""
    for frame in frames(response):
        assert frame.id, f"SSE frame without id: {frame}"
        yield int(frame.id), frame.json()


def post_stream(http: httpx.Client, url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST with ``stream: true`` and return every frame's data, checking the ids are consecutive.

    A new turn's ids start at 0; a resume continues the numbering of its turn.
    """
    with http.stream("POST", url, json={**body, "stream": True}) as response:
        assert response.status_code == 200, response.read().decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = list(iter_frames(response))
    ids = [frame_id for frame_id, _ in frames]
    first = 0 if not url.endswith("/resume") else (ids[0] if ids else 0)
    assert ids == list(range(first, first + len(ids)))
    return [data for _, data in frames]


def payloads(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The event payloads of frames (error frames are skipped)."""
    return [frame["event"]["payload"] for frame in frames if "event" in frame]


def event_types(frames: list[dict[str, Any]]) -> list[str]:
    """``event_type`` of each payload, ``error`` for an error frame."""
    return [frame["event"]["payload"]["event_type"] if "event" in frame else "error" for frame in frames]


def last_turn(frames: list[dict[str, Any]]) -> dict[str, Any]:
    """The turn carried by the final ``turn_complete`` or ``turn_awaiting_input`` event."""
    payload = payloads(frames)[-1]
    assert payload["event_type"] in ("turn_complete", "turn_awaiting_input"), payload
    turn: dict[str, Any] = payload["turn"]
    return turn


def run_turn(http: httpx.Client, agent_id: str, session_id: str, text: str, **extra: Any) -> dict[str, Any]:
    """A non-streaming turn; return its Turn JSON."""
    response = http.post(turn_url(agent_id, session_id), json={"messages": [user(text)], "stream": False, **extra})
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    return turn


def resume(
    http: httpx.Client, agent_id: str, session_id: str, turn_id: str, responses: list[dict[str, Any]], **extra: Any
) -> httpx.Response:
    """POST a resume; return the raw response."""
    body = {"tool_responses": responses, "stream": False, **extra}
    return http.post(f"{turn_url(agent_id, session_id, turn_id)}/resume", json=body)


def tool_response(call: dict[str, Any], content: str) -> dict[str, Any]:
    """A client's answer to one tool call of a Turn."""
    return {"call_id": call["call_id"], "tool_name": call["tool_name"], "content": content}


def wait_for(check: Callable[[], T | None], timeout: float = POLL_TIMEOUT, what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds.

    Only for a server in another process (replicas, restarts): in process, wait on
    the app's events instead (``Served.wait_settled``, ``wait_for_requests``).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def wait_for_status(http: httpx.Client, agent_id: str, session_id: str, turn_id: str, *statuses: str) -> dict[str, Any]:
    """Poll GET turn until its status is one of ``statuses``; return the turn."""

    def check() -> dict[str, Any] | None:
        response = http.get(turn_url(agent_id, session_id, turn_id))
        assert response.status_code == 200, response.text
        turn: dict[str, Any] = response.json()
        return turn if turn["status"] in statuses else None

    return wait_for(check, what=f"turn {turn_id} to reach {statuses}")


def wait_for_requests(model: Any, count: int) -> list[dict[str, Any]]:
    """Wait until the scripted model (in process or a server) has received ``count`` requests; no polling."""
    seen: list[dict[str, Any]] = model.wait_for_requests(count)
    return seen


@contextmanager
def open_gate_finally(model: Any, name: str) -> Iterator[str]:
    """Make sure a gate is opened at the end, so that no model reply stays held."""
    try:
        yield name
    finally:
        model.open_gate(name)


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """Check an error response's status and body shape; return its ``error`` object."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    error: dict[str, Any] = body["error"]
    assert error["message"], body
    assert body["detail"] == error["message"]
    if code is not None:
        assert error["code"] == code, body
    return error


def message_text(message: dict[str, Any]) -> str:
    """Text of an OpenAI chat message (string or list of parts)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def assert_valid_openai_history(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call is answered by tool messages right after it, as OpenAI requires."""
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") or []
        if message["role"] != "assistant" or not calls:
            continue
        expected = {call["id"] for call in calls}
        following = []
        for later in messages[index + 1 :]:
            if later["role"] != "tool":
                break
            following.append(later["tool_call_id"])
        assert set(following) == expected, (
            f"assistant message {index} calls {sorted(expected)} but is followed by tool answers "
            f"{following}: {[m['role'] for m in messages]}"
        )
