"""The ``telemetry:`` section of the settings: what the server tells operators about itself."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, Field, field_validator

from ferryman.trace_settings import TraceSettings


class TelemetrySettings(BaseModel):
    """Metrics (and, as they are added, traces and logs).

    ``metrics`` turns the Prometheus metrics at ``GET /metrics`` on (the default) or off.
    ``metrics_address`` (``HOST:PORT``, e.g. ``127.0.0.1:9464``) serves them on a separate listener
    instead, open to whoever reaches it, and not on the API's address: for a scraper on a private
    network while the API itself requires authentication.
    ``traces`` sends OpenTelemetry traces to an OTLP collector (off unless it or the ``OTEL_*`` variables ask).
    """

    metrics: bool = True
    metrics_address: str | None = None
    traces: TraceSettings = Field(default_factory=TraceSettings)

    @field_validator("metrics_address")
    @classmethod
    def _host_and_port(cls, value: str | None) -> str | None:
        if value is not None:
            split_address(value)
        return value


def split_address(address: str) -> tuple[str, int]:
    """The host and port of ``HOST:PORT`` (``[::1]:9464`` for an IPv6 host).

    Raises:
        ValueError: it is no ``HOST:PORT`` with a port in 1..65535.
    """
    host, sep, port = address.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    host = host[1:-1] if bracketed else host
    # An IPv6 host is bracketed (``[::1]:9464``): ``::1:9464`` could end in its port or not.
    if not sep or not host or (":" in host) != bracketed or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"must be HOST:PORT (e.g. 127.0.0.1:9464, [::1]:9464), not {address!r}")
    if bracketed:
        ipaddress.IPv6Address(host)
    return host, int(port)
