"""A small client for the scripted model server."""

from __future__ import annotations

from typing import Any

import httpx

from .scripted import Enqueuing, ScriptedReply, ScriptMismatchError


class ScriptedServerClient(Enqueuing):
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

    def open_gate(self, name: str) -> None:
        """Release replies held on ``name``."""
        self._http.post(f"/scripted/gates/{name}/open").raise_for_status()

    def requests(self) -> list[dict[str, Any]]:
        """The chat-completion bodies received so far."""
        data: list[dict[str, Any]] = self._http.get("/scripted/requests").json()["data"]
        return data

    def wait_for_requests(self, count: int) -> list[dict[str, Any]]:
        """The chat-completion bodies received, once at least ``count`` arrived (the server waits, no polling)."""
        response = self._http.get("/scripted/requests", params={"at_least": count}, timeout=30)
        response.raise_for_status()
        data: list[dict[str, Any]] = response.json()["data"]
        return data

    def check(self, allow_unused: bool = False) -> None:
        """Fail if scripted replies are left (unless ``allow_unused``) or a request found none.

        Raises:
            ScriptMismatchError: listing what the server reports.
        """
        found: list[str] = self._http.get("/scripted/problems", params={"allow_unused": allow_unused}).json()[
            "problems"
        ]
        if found:
            raise ScriptMismatchError("the scripted model server was not used as scripted:\n" + "\n".join(found))

    def reset(self) -> None:
        """Forget queued replies, requests and gates."""
        self._http.post("/scripted/reset").raise_for_status()

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()
