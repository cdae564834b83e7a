"""What every resource holds: the transport that runs its calls."""

from __future__ import annotations

from .._transport import AsyncTransport, SyncTransport

PROVIDER_DATA_HEADER = "X-LlamaStack-Provider-Data"
"""Per-request provider settings (upstream API keys); sent, never logged."""


class SyncResource:
    """A group of routes on a blocking client."""

    def __init__(self, transport: SyncTransport) -> None:
        self._transport = transport


class AsyncResource:
    """A group of routes on an async client."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport
