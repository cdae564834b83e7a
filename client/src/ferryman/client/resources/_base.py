"""What every resource holds: the transport that runs its calls."""

from __future__ import annotations

from typing import Any

from .._parsing import M, model
from .._transport import AsyncTransport, Call, RequestPlan, SyncTransport, path

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


def route_call(method: str, template: str, parsed: type[M], *ids: str, json: Any = None) -> Call[M]:
    """A call of the route ``template`` (its ``{}`` filled with ``ids``) whose answer is one ``parsed``."""
    return Call(RequestPlan(method, path(template, *ids), json=json), model(parsed))
