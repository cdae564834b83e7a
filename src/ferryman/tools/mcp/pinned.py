"""The HTTP client of an MCP connection, pinned to the addresses :func:`.endpoint.check_url` allowed.

Every request of the connection goes to a checked address with the original
``Host`` header and TLS server name, so a DNS answer that changes later
(rebinding) cannot point the connection elsewhere. Requests to any other host
(an SSE server may announce a message endpoint) are refused.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx2

from .endpoint import CheckedTarget


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
