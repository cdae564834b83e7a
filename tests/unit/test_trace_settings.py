"""When traces are exported and how: ``telemetry.traces`` and OpenTelemetry's standard variables."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ferryman.config import load_settings
from ferryman.engine.tracing import CONTENT, TRACE_KEY, paused_span
from ferryman.errors import ConfigurationError
from ferryman.server.trace_export import build_provider
from ferryman.server.tracing import Tracing, traces_wanted
from ferryman.trace_settings import TraceSettings


@pytest.fixture(autouse=True)
def _content_restored() -> Iterator[None]:
    yield
    CONTENT.enabled, CONTENT.max_chars = False, TraceSettings().max_content_chars


@pytest.mark.parametrize(
    ("settings", "environ", "wanted"),
    [
        ({}, {}, False),
        ({}, {"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({}, {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({}, {"OTEL_TRACES_EXPORTER": "console,otlp"}, True),
        ({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, True),
        ({}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"endpoint": "http://c:4318"}, {}, True),
        ({"exporter": "none"}, {"OTEL_TRACES_EXPORTER": "otlp"}, False),
        ({"exporter": "otlp"}, {}, True),
        ({"exporter": "otlp"}, {"OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_traces_are_off_unless_the_settings_or_the_variables_ask(
    settings: dict[str, str], environ: dict[str, str], wanted: bool
) -> None:
    assert traces_wanted(TraceSettings.model_validate(settings), environ) is wanted


def test_with_nothing_configured_no_provider_is_installed_and_no_content_recorded() -> None:
    tracing = Tracing.of(None, {})
    tracing.start()
    assert tracing.provider is None
    assert not tracing.exports
    assert CONTENT.enabled is False
    tracing.stop()


def test_content_is_recorded_when_the_setting_or_the_genai_variable_says_so() -> None:
    Tracing.of(TraceSettings(capture_content=True, max_content_chars=10), {}).start()
    assert (CONTENT.enabled, CONTENT.max_chars) == (True, 10)
    Tracing.of(None, {}).start()
    assert CONTENT.enabled is False
    Tracing.of(None, {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}).start()
    assert CONTENT.enabled is True


def test_the_provider_batches_to_the_configured_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    settings = TraceSettings(endpoint="http://collector:4318/", max_queue_size=100, max_export_batch_size=10)
    provider = build_provider(settings, {})
    try:
        assert provider.resource.attributes["service.name"] == "ferryman"
        [processor] = provider._active_span_processor._span_processors  # the SDK keeps no public list
        assert isinstance(processor, BatchSpanProcessor)
        exporter = processor._batch_processor._exporter
        assert exporter._endpoint == "http://collector:4318/v1/traces"
    finally:
        provider.shutdown()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-the-variable")
    named = build_provider(TraceSettings(), {})
    assert named.resource.attributes["service.name"] == "from-the-variable"
    named.shutdown()
    chosen = build_provider(TraceSettings(service_name="from-the-file"), {})
    assert chosen.resource.attributes["service.name"] == "from-the-file"
    chosen.shutdown()


def test_the_config_file_has_a_traces_section(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "telemetry:\n  traces:\n    exporter: otlp\n    endpoint: http://c:4318\n    capture_content: true\n"
    )
    traces = load_settings(str(path)).telemetry.traces
    assert (traces.exporter, traces.endpoint, traces.capture_content) == ("otlp", "http://c:4318", True)
    path.write_text("telemetry:\n  traces:\n    max_queue_size: 10\n    max_export_batch_size: 20\n")
    with pytest.raises(ConfigurationError, match="max_export_batch_size must not exceed max_queue_size"):
        load_settings(str(path))
    path.write_text("telemetry:\n  traces:\n    exporter: zipkin\n")
    with pytest.raises(ConfigurationError, match="telemetry.traces.exporter"):
        load_settings(str(path))


@pytest.mark.parametrize(
    "kept",
    [None, "x", {"trace_id": "zz", "span_id": "01"}, {"trace_id": "0" * 32, "span_id": "0" * 16}, {"span_id": "1"}],
)
def test_a_turn_without_usable_span_ids_links_to_nothing(kept: object) -> None:
    assert paused_span({TRACE_KEY: kept} if kept is not None else {}) is None


def test_kept_span_ids_are_read_back() -> None:
    context = paused_span({TRACE_KEY: {"trace_id": f"{7:032x}", "span_id": f"{9:016x}"}})
    assert context is not None
    assert (context.trace_id, context.span_id, context.is_remote) == (7, 9, True)
