"""A small client for the scripted model server."""

from __future__ import annotations

from typing import Any

import httpx

from .scripted import ScriptedError, ScriptedReply, ScriptedToolCall


class ScriptedServerClient:
    """Enqueue replies into a running ``ferryman.testing.server`` and read what it received.

    Args:
        base_url: The server's root URL, e.g. ``http://127.0.0.1:9000``.
    """

    def __init__(self, base_url: str) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=10)

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Queue replies for the next requests."""
        body = [reply.model_dump(mode="json") for reply in replies]
        self._http.post("/scripted/replies", json=body).raise_for_status()

    def enqueue_text(self, text: str, gate: str | None = None) -> None:
        """Queue a plain text answer, optionally held until ``gate`` opens."""
        self.enqueue(ScriptedReply(text=text, gate=gate))

    def enqueue_tool_call(self, name: str, arguments: dict[str, Any] | None = None) -> None:
        """Queue an answer that calls one tool."""
        call = ScriptedToolCall(name=name, arguments=arguments or {})
        self.enqueue(ScriptedReply(tool_calls=[call]))

    def enqueue_error(self, status_code: int = 500, message: str = "scripted failure") -> None:
        """Queue an upstream failure."""
        self.enqueue(ScriptedReply(error=ScriptedError(status_code=status_code, message=message)))

    def open_gate(self, name: str) -> None:
        """Release replies held on ``name``."""
        self._http.post(f"/scripted/gates/{name}/open").raise_for_status()

    def requests(self) -> list[dict[str, Any]]:
        """The chat-completion bodies received so far."""
        data: list[dict[str, Any]] = self._http.get("/scripted/requests").json()["data"]
        return data

    def reset(self) -> None:
        """Forget queued replies, requests and gates."""
        self._http.post("/scripted/reset").raise_for_status()

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()
