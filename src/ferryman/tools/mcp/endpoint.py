"""An MCP server as a client names it, and the HTTP client that may reach it (and nothing else).

The URL of an MCP server is untrusted (a client names it in a toolgroup or a
Responses ``mcp`` tool), so it is held to the operator's fetch policy like any
URL the server fetches for a client (see :mod:`ferryman.safe_fetch`): its host
is resolved once, every address must be public or allow-listed, and every
request of the connection then goes to a checked address with the original
``Host`` header and TLS server name, so a DNS answer that changes later
(rebinding) cannot point the connection elsewhere. Requests to any other host
(an SSE server may announce a message endpoint) are refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import httpx2

from ferryman.errors import InvalidRequestError
from ferryman.logs import redacted_url
from ferryman.safe_fetch import FetchPolicy, IPAddress, checked_addresses

log = logging.getLogger(__name__)

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


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends each request to a checked address of the one allowed host."""

    def __init__(self, target: CheckedTarget) -> None:
        self._target = target
        self._inner = httpx2.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request`` to the pinned addresses in turn, naming the host as asked."""
        allowed = self._target.url
        if (request.url.scheme, request.url.host, request.url.port) != (allowed.scheme, allowed.host, allowed.port):
            raise httpx2.ConnectError(f"refused: {request.url.host} is not the MCP server's host", request=request)
        if request.url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": allowed.host}
        original = request.url
        failure: httpx2.ConnectError | None = None
        for address in self._target.addresses:
            # The Host header was set from the original URL when the request was built.
            request.url = original.copy_with(host=str(address))
            try:
                return await self._inner.handle_async_request(request)
            except httpx2.ConnectError as exc:
                failure = exc
            finally:
                request.url = original
        assert failure is not None  # a CheckedTarget holds at least one address
        raise failure

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._inner.aclose()


def pinned_client(
    target: CheckedTarget,
    headers: Mapping[str, str],
    timeout: httpx2.Timeout,
) -> httpx2.AsyncClient:
    """An HTTP client that reaches only ``target`` (through its checked addresses), sending ``headers``."""
    return httpx2.AsyncClient(
        headers=dict(headers),
        timeout=timeout,
        transport=PinnedTransport(target),
        trust_env=False,
    )
