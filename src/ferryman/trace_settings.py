"""The ``telemetry.traces:`` settings: whether and where the server sends its OpenTelemetry traces."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator


class TraceSettings(BaseModel):
    """Traces over OTLP/HTTP: a span per request, per turn, per model call, per tool call, per shield.

    Off unless this section or OpenTelemetry's standard variables ask for them. Each field left unset
    falls back to its variable (``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
    ``OTEL_SERVICE_NAME``, ``OTEL_BSP_*``…), then to the SDK's default; a value set here wins over the
    variable. ``OTEL_SDK_DISABLED=true`` turns traces off whatever this section says.
    """

    exporter: Literal["otlp", "none"] | None = None
    """``otlp`` sends traces to an OTLP/HTTP collector; ``none`` traces nothing. Unset: what
    ``OTEL_TRACES_EXPORTER`` says, else on when ``endpoint``, ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, else off."""

    endpoint: str | None = None
    """The collector's OTLP/HTTP base URL (``http://collector:4318``; spans go to its ``/v1/traces``).
    Unset: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_ENDPOINT``, else
    ``http://localhost:4318``."""

    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    """Headers sent with every export (a collector's credentials: never logged). Empty:
    ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or ``OTEL_EXPORTER_OTLP_HEADERS``."""

    service_name: str | None = None
    """The ``service.name`` of the spans. Unset: ``OTEL_SERVICE_NAME`` (or ``service.name`` in
    ``OTEL_RESOURCE_ATTRIBUTES``), else ``ferryman``."""

    capture_content: bool = False
    """Record what was said: the messages of each model call, tool calls' arguments and results,
    retrieval queries. Off by default (also on with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``):
    spans then carry ids, names, token counts and timings only."""

    max_content_chars: int = Field(default=8192, gt=0)
    """With ``capture_content``, the longest text one span attribute holds; longer content is cut, with a
    note saying how long it was."""

    max_queue_size: int | None = Field(default=None, gt=0)
    """Spans held for export at most (more are dropped). Unset: ``OTEL_BSP_MAX_QUEUE_SIZE``, else 2048."""

    schedule_delay_ms: int | None = Field(default=None, gt=0)
    """Milliseconds between two exports. Unset: ``OTEL_BSP_SCHEDULE_DELAY``, else 5000."""

    max_export_batch_size: int | None = Field(default=None, gt=0)
    """Spans sent in one export at most (no more than ``max_queue_size``). Unset:
    ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``, else 512."""

    export_timeout_ms: int | None = Field(default=None, gt=0)
    """Milliseconds one export may take. Unset: ``OTEL_BSP_EXPORT_TIMEOUT``, else 30000."""

    @model_validator(mode="after")
    def _batch_fits_queue(self) -> TraceSettings:
        if self.max_queue_size and self.max_export_batch_size and self.max_export_batch_size > self.max_queue_size:
            raise ValueError("max_export_batch_size must not exceed max_queue_size")
        return self
