"""Exporting traces: OpenTelemetry's SDK tracer provider, batching spans to an OTLP/HTTP collector.

Imported by :meth:`.tracing.Tracing.start` only where traces are exported: the SDK, its exporter
and protobuf stay out of a process that does not trace.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

from ferryman.trace_settings import TraceSettings

from .otlp_encoding import encode_spans

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "ferryman"


def build_provider(settings: TraceSettings, environ: Mapping[str, str]) -> TracerProvider:
    """A tracer provider that batches spans to the OTLP/HTTP collector the settings and variables name.

    The sampler is the SDK's default or ``OTEL_TRACES_SAMPLER``'s; the exporter and the batch
    processor read the ``OTEL_EXPORTER_OTLP_*`` and ``OTEL_BSP_*`` variables for what the settings leave unset.
    """
    endpoint = settings.endpoint.rstrip("/") + "/v1/traces" if settings.endpoint else None
    if environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf") != "http/protobuf":
        log.warning("ferryman exports traces over OTLP/HTTP (http/protobuf) only; OTEL_EXPORTER_OTLP_PROTOCOL ignored")
    exporter = LeanOTLPSpanExporter(endpoint=endpoint, headers=dict(settings.headers) or None)
    processor = BatchSpanProcessor(
        exporter,
        max_queue_size=settings.max_queue_size,
        schedule_delay_millis=settings.schedule_delay_ms,
        max_export_batch_size=settings.max_export_batch_size,
        export_timeout_millis=settings.export_timeout_ms,
    )
    provider = TracerProvider(resource=_resource(settings))
    provider.add_span_processor(processor)
    return provider


class LeanOTLPSpanExporter(OTLPSpanExporter):
    """OpenTelemetry's OTLP/HTTP span exporter, encoding each batch with :func:`.otlp_encoding.encode_spans`.

    The SDK's exporter still resolves every ``OTEL_EXPORTER_OTLP_*`` variable and sends, retries and
    compresses; only the encoding (half of what an exported span costs) is ours. An exporter whose
    internals differ from those of the version this was written against exports as the SDK does.
    """

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send ``spans`` to the collector in one request."""
        client: Any = getattr(self, "_client", None)
        if getattr(self, "_shutdown", True) or not callable(getattr(client, "export", None)):
            return super().export(spans)
        try:
            data = encode_spans(spans)
        except TypeError:
            log.exception("a span batch could not be encoded; the SDK's encoder takes it")
            return super().export(spans)
        sent = client.export(data)
        return SpanExportResult.SUCCESS if sent.success else SpanExportResult.FAILURE


def _resource(settings: TraceSettings) -> Resource:
    attributes: dict[str, str] = {}
    try:
        attributes["service.version"] = version("ferryman")
    except PackageNotFoundError:  # run from a source tree without its metadata
        pass
    if settings.service_name:
        attributes["service.name"] = settings.service_name
    elif str(Resource.create().attributes.get("service.name", "")).startswith("unknown_service"):
        attributes["service.name"] = DEFAULT_SERVICE_NAME  # neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES
    return Resource.create(attributes)  # with what those variables say, below ours
