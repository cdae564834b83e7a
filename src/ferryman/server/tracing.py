"""This process's tracer provider: OpenTelemetry's SDK exporting over OTLP/HTTP, when the settings ask for it.

Traces are off by default: no provider is installed, and every span the engine and the HTTP edge
start is OpenTelemetry's no-op one. ``telemetry.traces`` or OpenTelemetry's standard variables turn
them on (:func:`traces_wanted`); each ``--workers`` process installs its own provider when its app
starts and flushes it when the app stops. A provider that something else installed first (a host
application, ``opentelemetry-instrument``) is used as it is.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

from ferryman.engine.tracing import CONTENT
from ferryman.trace_settings import TraceSettings

from .otlp_encoding import encode_spans

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "ferryman"
_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def traces_wanted(settings: TraceSettings, environ: Mapping[str, str]) -> bool:
    """Whether traces are to be exported: the setting, else ``OTEL_TRACES_EXPORTER``, else an endpoint set.

    ``OTEL_SDK_DISABLED=true`` says no whatever else does.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if settings.exporter is not None:
        return settings.exporter == "otlp"
    named = [name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip()]
    if named:
        unsupported = sorted(set(named) - {"otlp", "none"})
        if unsupported:
            log.warning("OTEL_TRACES_EXPORTER names exporters ferryman does not have: %s", ", ".join(unsupported))
        return "otlp" in named
    return settings.endpoint is not None or any(environ.get(name) for name in _ENDPOINT_VARIABLES)


def provider_installed() -> bool:
    """Whether a tracer provider is installed in this process (ours, or one installed before ours)."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


@dataclass
class Tracing:
    """What the app does about traces: whether it traces, and the provider it installed (to flush at exit).

    Args:
        settings: ``telemetry.traces``.
        environ: The variables that stand in for unset settings (this process's environment).
    """

    settings: TraceSettings
    environ: Mapping[str, str]
    provider: TracerProvider | None = None

    @classmethod
    def of(cls, settings: TraceSettings | None, environ: Mapping[str, str] | None = None) -> Tracing:
        """The tracing of an app with ``settings`` (None: the defaults) in ``environ`` (default: ``os.environ``)."""
        return cls(settings or TraceSettings(), os.environ if environ is None else environ)

    @property
    def exports(self) -> bool:
        """Whether this app is to install a provider exporting over OTLP."""
        return traces_wanted(self.settings, self.environ)

    @property
    def on(self) -> bool:
        """Whether requests get spans: traces are exported, or someone else installed a provider."""
        return self.exports or provider_installed()

    def start(self) -> None:
        """Install the exporting provider (unless one is there already) and the content policy."""
        CONTENT.enabled = self.settings.capture_content or self._content_variable()
        CONTENT.max_chars = self.settings.max_content_chars
        if not self.exports or provider_installed():
            return
        self.provider = build_provider(self.settings, self.environ)
        trace.set_tracer_provider(self.provider)

    def stop(self) -> None:
        """Export what is still queued and stop exporting (the provider stays installed, inert)."""
        if self.provider is not None:
            self.provider.shutdown()

    def _content_variable(self) -> bool:
        return self.environ.get(_CONTENT_VARIABLE, "").strip().lower() == "true"


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
