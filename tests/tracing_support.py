"""Spans of the tests that read traces: an SDK tracer provider installed once per test process, collecting on demand.

OpenTelemetry lets a process install its global tracer provider once; the first test that asks
(:func:`collected_spans`) installs one whose processor hands each ended span to the in-memory
exporter of the test that is collecting, and drops it otherwise (the tests of this worker that
follow trace into nothing).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ferryman.engine.tracing import CONTENT


class _Collecting(SpanProcessor):
    """Passes ended spans to the collecting test's processor, if a test is collecting; keeps those not ended yet."""

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None
        self.open: dict[int, str] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.target is not None:
            self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        if self.target is not None:
            if span.context is not None:
                self.open.pop(span.context.span_id, None)
            self.target.on_end(span)


@functools.cache
def _installed() -> _Collecting:
    collecting = _Collecting()
    provider = TracerProvider()
    provider.add_span_processor(collecting)
    trace.set_tracer_provider(provider)
    return collecting


@contextmanager
def collected_spans() -> Iterator[InMemorySpanExporter]:
    """The spans that end in this process meanwhile (an app's start sets whether they record content)."""
    collecting = _installed()
    exporter = InMemorySpanExporter()
    collecting.open.clear()
    collecting.target = SimpleSpanProcessor(exporter)
    try:
        yield exporter
    finally:
        collecting.target = None
        CONTENT.enabled = False


def unended_spans() -> list[str]:
    """The names of the spans started while the current test collects that have not ended."""
    return sorted(_installed().open.values())


def named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    """The spans whose name starts with ``prefix``, in the order they started."""
    return sorted((s for s in spans if s.name.startswith(prefix)), key=lambda s: s.start_time or 0)


def parent_id(span: ReadableSpan) -> int | None:
    """The span id of a span's parent (None: a root)."""
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    """A span's own id."""
    context = span.get_span_context()
    assert context is not None
    return context.span_id
