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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry import trace

from ferryman.engine.tracing import CONTENT
from ferryman.trace_settings import TraceSettings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger(__name__)

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
        # The SDK and its OTLP exporter (protobuf: about 5 MiB) load only in a process that exports traces.
        from .trace_export import build_provider

        self.provider = build_provider(self.settings, self.environ)
        trace.set_tracer_provider(self.provider)

    def stop(self) -> None:
        """Export what is still queued and stop exporting (the provider stays installed, inert)."""
        if self.provider is not None:
            self.provider.shutdown()

    def _content_variable(self) -> bool:
        return self.environ.get(_CONTENT_VARIABLE, "").strip().lower() == "true"
