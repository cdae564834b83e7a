"""``GET /metrics``: the server's Prometheus metrics, for whom the access policy lets read them.

With authentication off it is open, like every route. With it on, the caller needs a rule
permitting ``read`` on the resource ``metrics::server`` (nobody owns it, so the default
policy, each caller its own records, lets no one read it); refused, it is a 403, audited.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ferryman.auth.audit import audit
from ferryman.auth.principal import current_principal
from ferryman.errors import ForbiddenError
from ferryman.metrics.multiprocess import CONTENT_TYPE, exposition
from ferryman.telemetry_settings import TelemetrySettings

from .http import services

METRICS_PATH = "/metrics"
METRICS_RESOURCE = "metrics::server"
"""The resource an access policy rule names to let callers read ``/metrics`` (action ``read``)."""


async def metrics(request: Request) -> Response:
    """Every metric of this server (all its worker processes), in Prometheus's text format."""
    if not services(request).policy.allows(current_principal.get(), "read", METRICS_RESOURCE, None):
        audit("denied", "read", METRICS_RESOURCE, status=403)
        raise ForbiddenError(
            f"not allowed to read {METRICS_PATH}: the access policy grants no read on {METRICS_RESOURCE}"
        )
    # Reading several workers' files is blocking work: off the event loop.
    body = await asyncio.to_thread(exposition)
    return Response(body, media_type=CONTENT_TYPE)


def metrics_routes() -> list[Route]:
    """The route of ``/metrics`` (outside the API's mounts and its OpenAPI document: it is for scrapers)."""
    return [Route(METRICS_PATH, metrics, methods=["GET"])]


MetricsServed = Literal["here", "elsewhere", "off"]
"""Where a server's metrics are served: at ``/metrics`` on its API's address, on ``telemetry.metrics_address``
(recorded all the same), or nowhere (``telemetry.metrics: false``: not served, HTTP requests not timed)."""


def metrics_served(telemetry: TelemetrySettings) -> MetricsServed:
    """Where the ``telemetry`` settings serve the metrics."""
    if not telemetry.metrics:
        return "off"
    return "here" if telemetry.metrics_address is None else "elsewhere"
