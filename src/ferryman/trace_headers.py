"""W3C trace context on outgoing requests: the headers that carry the current span to the server called."""

from __future__ import annotations

from opentelemetry import propagate, trace


def trace_headers() -> dict[str, str]:
    """The current span's ``traceparent`` (and ``tracestate``) as headers; empty when nothing is traced."""
    carrier: dict[str, str] = {}
    if trace.get_current_span().get_span_context().is_valid:
        propagate.inject(carrier)
    return carrier
