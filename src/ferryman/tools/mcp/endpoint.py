"""An MCP server as a client names it, and the check of the addresses it may be reached at.

The URL of an MCP server is untrusted (a client names it in a toolgroup or a
Responses ``mcp`` tool), so it is held to the operator's fetch policy like any
URL the server fetches for a client (see :mod:`ferryman.safe_fetch`): its host
is resolved once and every address must be public or allow-listed; the
connection then goes only to those addresses (:mod:`.pinned`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ferryman.errors import InvalidRequestError
from ferryman.logs import redacted_url
from ferryman.safe_fetch import FetchPolicy, IPAddress, checked_addresses

if TYPE_CHECKING:
    import httpx2

McpTransport = Literal["auto", "streamable_http", "sse"]
"""How to talk to the server; ``auto`` tries streamable HTTP and falls back to SSE."""


@dataclass(frozen=True)
class McpEndpoint:
    """An MCP server reachable over HTTP.

    Attributes:
        url: The server's endpoint (``…/mcp`` for streamable HTTP, ``…/sse`` for SSE).
        transport: ``streamable_http``, ``sse`` or ``auto``.
        headers: Sent with every request; credentials, so never shown in ``repr``, logs or errors.
    """

    url: str
    transport: McpTransport = "auto"
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)

    @property
    def key(self) -> tuple[str, str, str]:
        """What a pooled connection is shared by: URL, transport and a digest of the headers."""
        canonical = json.dumps(sorted((name.lower(), value) for name, value in self.headers.items()))
        return self.url, self.transport, hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def display_url(self) -> str:
        """The URL without user info, query or fragment (any of which may hold a secret)."""
        return redacted_url(self.url)


@dataclass(frozen=True)
class CheckedTarget:
    """A URL whose host resolved to addresses the fetch policy allows."""

    url: httpx2.URL
    addresses: tuple[IPAddress, ...]


async def check_url(url: str, policy: FetchPolicy, field_name: str | None = None) -> CheckedTarget:
    """Resolve the URL's host and hold every address to ``policy``.

    Raises:
        InvalidRequestError: the URL is not http(s), does not resolve, or reaches a non-public
            address the operator did not allow.
    """
    import httpx2  # with the first MCP server named, not the server's start (about 4 MiB)

    shown = redacted_url(url)
    try:
        target = httpx2.URL(url)
    except httpx2.InvalidURL as exc:
        raise InvalidRequestError(f"invalid MCP server URL {shown!r}", field_name) from exc
    if target.scheme not in ("http", "https") or not target.host:
        raise InvalidRequestError(f"an MCP server URL must be http(s) with a host, not {shown!r}", field_name)
    port = target.port or (443 if target.scheme == "https" else 80)
    found = await checked_addresses(target.host, port, policy, field_name, f"connect to the MCP server {shown}")
    addresses = tuple(found)
    return CheckedTarget(target, addresses)
