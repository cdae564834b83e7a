"""Which POST routes take an ``Idempotency-Key``, how a request is fingerprinted, and how a stream is replayed.

A streamed answer is not stored: its first SSE frame names what runs (a turn,
a response) and where its events start, and a repeat reads them again from the
route that replays that stream, following live events if the run goes on.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.routing import compile_path

from .contract import Endpoint

ALPHA_PREFIX = "/v1alpha/"


@dataclass(frozen=True)
class Frame:
    """One SSE frame: its ``id:`` and its ``data:`` as JSON (empty when it is not a JSON object)."""

    id: int | None
    data: dict[str, Any]


@dataclass(frozen=True)
class Replay:
    """Where a streamed answer can be read again: a GET of ``path`` after event number ``after``.

    ``one_run`` says the stream holds later runs too (a turn's resumes), so a
    replay stops at the end of the first one.
    """

    path: str
    after: int
    one_run: bool

    def to_json(self) -> dict[str, Any]:
        """The pointer as stored."""
        return {"path": self.path, "after": self.after, "one_run": self.one_run}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Replay:
        """A stored pointer."""
        return cls(str(data["path"]), int(data["after"]), bool(data["one_run"]))

    def query_and_headers(self) -> tuple[str, list[tuple[bytes, bytes]]]:
        """The query string and extra headers of the GET that replays the stream."""
        if self.one_run:  # the Agents API's events route reads Last-Event-ID
            return "", [(b"last-event-id", str(self.after).encode())]
        return f"stream=true&starting_after={self.after}", []


StreamReplay = Callable[[dict[str, str], Frame], Replay | None]


def turn_replay(params: dict[str, str], frame: Frame) -> Replay | None:
    payload = frame.data.get("event", {}).get("payload", {})
    if frame.id is None or payload.get("event_type") != "turn_start":
        return None
    turn = f"/v1/agents/{params['agent_id']}/session/{params['session_id']}/turn/{payload['turn_id']}"
    return Replay(f"{turn}/events", frame.id - 1, one_run=True)


def response_replay(params: dict[str, str], frame: Frame) -> Replay | None:
    if frame.data.get("type") != "response.created" or frame.data["response"].get("store") is False:
        return None  # a response not stored is gone once it ends: nothing to replay it from
    return Replay(f"/v1/responses/{frame.data['response']['id']}", int(frame.data["sequence_number"]) - 1, False)


@dataclass(frozen=True)
class IdempotentRoute:
    """A POST route that takes an ``Idempotency-Key``; ``stream`` reads a streamed answer's first frame."""

    template: str
    stream: StreamReplay | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        """The route's path as a regular expression with named parameters."""
        return compile_path(self.template)[0]


def idempotent_routes(mounts: Sequence[tuple[str, Sequence[Endpoint]]]) -> tuple[IdempotentRoute, ...]:
    """The routes of the route tables that create or run something (``Endpoint.creates``), under their prefixes."""
    return tuple(
        IdempotentRoute(prefix + entry.path, entry.replay)
        for prefix, table in mounts
        for entry in table
        if entry.creates
    )


def normalised(path: str) -> str:
    """The path with the Agents API's ``/v1alpha`` prefix read as ``/v1``: the same routes, the same keys."""
    if path.startswith(f"{ALPHA_PREFIX}agents"):
        return "/v1/" + path.removeprefix(ALPHA_PREFIX)
    return path


def match(routes: Sequence[IdempotentRoute], path: str) -> tuple[IdempotentRoute, dict[str, str]] | None:
    """The idempotent route a POST to ``path`` (already normalised) goes to, with its parameters."""
    for route in routes:
        found = route.pattern.match(path)
        if found:
            return route, found.groupdict()
    return None


def fingerprint(path: str, body: bytes, provider_data: str | None = None) -> str:
    """What makes two requests "the same": the normalised path, the body (JSON compared by value) and the
    provider data header (its keys change what runs; only this digest of them is kept)."""
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode()
    except ValueError:  # not JSON (or not UTF-8): the route answers 400, compared byte by byte
        canonical = body
    header = hashlib.sha256((provider_data or "").encode()).hexdigest()
    return hashlib.sha256(f"POST {path}\n{header}\n".encode() + canonical).hexdigest()


def parse_frame(text: str) -> Frame:
    """The id and JSON data of one SSE frame (without its blank line)."""
    frame_id: int | None = None
    data: list[str] = []
    for line in text.splitlines():
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id" and value.lstrip("-").isdigit():
            frame_id = int(value)
        elif name == "data":
            data.append(value)
    try:
        parsed = json.loads("\n".join(data)) if data else {}
    except ValueError:
        parsed = {}
    return Frame(frame_id, parsed if isinstance(parsed, dict) else {})


def ends_run(frame: Frame) -> bool:
    """Whether a turn's frame is the last of its run: the turn completed, paused, or failed."""
    if "error" in frame.data:
        return True
    payload = frame.data.get("event", {}).get("payload", {})
    return payload.get("event_type") in ("turn_complete", "turn_awaiting_input")


class FrameSplitter:
    """Cuts a byte stream of SSE into whole frames (each with its blank line)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The frames ``chunk`` completes."""
        self._buffer += chunk.replace(b"\r\n", b"\n")
        *frames, self._buffer = self._buffer.split(b"\n\n")
        return [frame + b"\n\n" for frame in frames]

    @property
    def pending(self) -> bytes:
        """What came after the last whole frame."""
        return self._buffer
