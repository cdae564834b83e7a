"""The lean OTLP encoder writes, for any spans the SDK makes, the bytes OpenTelemetry's own encoder writes."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from ferryman.server import otlp_encoding, trace_export
from ferryman.server.otlp_encoding import encode_spans
from ferryman.server.trace_export import LeanOTLPSpanExporter

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_FLOAT = st.floats(allow_nan=False)
_SCALAR = st.one_of(st.text(max_size=12), st.booleans(), _INT64, _FLOAT)
_SEQUENCE = st.one_of(*(st.lists(kind, max_size=3) for kind in (st.text(max_size=5), st.booleans(), _INT64, _FLOAT)))
_ATTRIBUTES = st.dictionaries(st.text(min_size=1, max_size=8), st.one_of(_SCALAR, _SEQUENCE), max_size=5)
_IDS = st.tuples(st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1))


@st.composite
def _span_plans(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "name": draw(st.text(max_size=16)),
        "kind": draw(st.sampled_from(list(SpanKind))),
        "attributes": draw(_ATTRIBUTES),
        "later": draw(_ATTRIBUTES),
        "events": draw(st.lists(st.tuples(st.text(max_size=8), _ATTRIBUTES), max_size=2)),
        "links": draw(st.lists(st.tuples(_IDS, _ATTRIBUTES, st.booleans()), max_size=2)),
        "status": draw(st.sampled_from([None, (StatusCode.OK, None), (StatusCode.ERROR, "it broke")])),
        "parent": draw(st.one_of(st.none(), st.tuples(_IDS, st.booleans()))),
        "child": draw(st.booleans()),
        "state": draw(st.sampled_from([None, TraceState([("vendor", "v1")])])),
        "scope": draw(st.sampled_from([("ferryman.engine", None), ("ferryman.server", "1.2")])),
    }


def _context(ids: tuple[int, int], remote: bool, state: TraceState | None = None) -> SpanContext:
    trace_id, span_id = ids
    return SpanContext(
        trace_id, span_id, is_remote=remote, trace_flags=TraceFlags(TraceFlags.SAMPLED), trace_state=state
    )


def _made(plans: Sequence[dict[str, Any]], resource: Resource) -> tuple[ReadableSpan, ...]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for plan in plans:
        tracer = provider.get_tracer(*plan["scope"])
        parent = None
        if plan["parent"] is not None:
            ids, remote = plan["parent"]
            parent = trace.set_span_in_context(trace.NonRecordingSpan(_context(ids, remote, plan["state"])))
        links = [Link(_context(ids, remote), attributes) for ids, attributes, remote in plan["links"]]
        span = tracer.start_span(
            plan["name"], context=parent, kind=plan["kind"], attributes=plan["attributes"], links=links
        )
        span.set_attributes(plan["later"])
        for name, attributes in plan["events"]:
            span.add_event(name, attributes)
        if plan["status"] is not None:
            span.set_status(Status(*plan["status"]))
        if plan["child"]:
            with trace.use_span(span):
                tracer.start_span("child").end()
        span.end()
    provider.shutdown()
    return exporter.get_finished_spans()


@settings(max_examples=100, deadline=None)
@given(
    plans=st.lists(_span_plans(), min_size=1, max_size=4),
    resource=st.sampled_from([{"service.name": "ferryman"}, {"service.name": "x", "service.version": "1", "n": 3}]),
)
def test_the_bytes_are_the_sdk_encoders(plans: list[dict[str, Any]], resource: dict[str, Any]) -> None:
    spans = _made(plans, Resource(resource, schema_url="https://opentelemetry.io/schemas/1.21.0"))
    expected = sdk_encode_spans(spans)
    ours = encode_spans(spans)
    assert ExportTraceServiceRequest.FromString(ours) == expected
    assert ours == expected.SerializeToString()


def test_two_resources_and_two_scopes_group_as_the_sdk_groups() -> None:
    plan = {
        "name": "n", "kind": SpanKind.INTERNAL, "attributes": {}, "later": {}, "events": [], "links": [],
        "status": None, "parent": None, "child": False, "state": None,
    }  # fmt: skip
    first = _made([{**plan, "scope": ("a", None)}, {**plan, "scope": ("b", "2")}], Resource({"r": 1}))
    second = _made([{**plan, "scope": ("a", None)}], Resource({"r": 2}))
    equal_to_first = _made([{**plan, "scope": ("b", "2")}], Resource({"r": 1}))  # another object, the same resource
    spans = (*first, *second, *first, *equal_to_first)
    assert encode_spans(spans) == sdk_encode_spans(spans).SerializeToString()
    assert len(sdk_encode_spans(spans).resource_spans) == 2


def test_equal_values_of_different_types_are_each_written_as_their_own() -> None:
    plan = {
        "name": "n", "kind": SpanKind.INTERNAL, "later": {}, "events": [], "links": [], "status": None,
        "parent": None, "child": False, "state": None, "scope": ("a", None),
    }  # fmt: skip
    # True == 1 == 1.0 in Python: the cache of written attributes must not serve one for another.
    spans = _made([{**plan, "attributes": {"v": value}} for value in (True, 1, 1.0, 1, True)], Resource({}))
    decoded = ExportTraceServiceRequest.FromString(encode_spans(spans))
    values = [s.attributes[0].value for s in decoded.resource_spans[0].scope_spans[0].spans]
    assert [v.WhichOneof("value") for v in values] == [
        "bool_value",
        "int_value",
        "double_value",
        "int_value",
        "bool_value",
    ]


def test_minus_zero_is_written_as_itself() -> None:
    plan = {
        "name": "n", "kind": SpanKind.INTERNAL, "later": {}, "events": [], "links": [], "status": None,
        "parent": None, "child": False, "state": None, "scope": ("a", None),
    }  # fmt: skip
    # 0.0 == -0.0, with one hash: a cache of written attributes keyed by value would write one for the other.
    spans = _made([{**plan, "attributes": {"v": value}} for value in (0.0, -0.0, 0.0)], Resource({}))
    assert encode_spans(spans) == sdk_encode_spans(spans).SerializeToString()


def test_a_span_not_made_by_the_sdk_tracer_is_written_as_the_sdk_writes_it() -> None:
    # Its attributes a plain dict, its events and links tuples: not the SDK's bounded containers.
    span = ReadableSpan(
        "made by hand",
        context=_context((7, 8), remote=False),
        parent=_context((7, 9), remote=True),
        resource=Resource({"service.name": "ferryman"}),
        attributes={"a": 1, "b": "two", "c": [True, False]},
        events=(Event("happened", {"k": "v"}, timestamp=5),),
        links=(Link(_context((10, 11), remote=True), {"why": "resumes"}),),
        kind=SpanKind.CLIENT,
        status=Status(StatusCode.ERROR, "it broke"),
        start_time=1,
        end_time=2,
    )
    assert encode_spans([span]) == sdk_encode_spans([span]).SerializeToString()


def test_the_cache_of_written_attributes_is_bounded() -> None:
    plan = {
        "name": "n", "kind": SpanKind.INTERNAL, "later": {}, "events": [], "links": [], "status": None,
        "parent": None, "child": False, "state": None, "scope": ("a", None),
    }  # fmt: skip
    spans = _made(
        [{**plan, "attributes": {"id": f"turn-{i}"}} for i in range(otlp_encoding._MAX_PAIRS + 50)], Resource({})
    )
    assert ExportTraceServiceRequest.FromString(encode_spans(spans)) == sdk_encode_spans(spans)
    assert len(otlp_encoding._PAIRS) <= otlp_encoding._MAX_PAIRS


@pytest.fixture
def collector() -> Iterator[tuple[list[bytes], str]]:
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield bodies, f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    finally:
        server.shutdown()
        server.server_close()


def test_the_exporter_posts_the_lean_encoding(
    collector: tuple[list[bytes], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies, endpoint = collector
    encoded: list[int] = []

    def counted(spans: Sequence[ReadableSpan]) -> bytes:
        encoded.append(len(spans))
        return encode_spans(spans)

    monkeypatch.setattr(trace_export, "encode_spans", counted)
    plan = {
        "name": "n", "kind": SpanKind.SERVER, "attributes": {"a": 1}, "later": {}, "events": [], "links": [],
        "status": None, "parent": None, "child": True, "state": None, "scope": ("a", None),
    }  # fmt: skip
    spans = _made([plan], Resource({"service.name": "ferryman"}))
    exporter = LeanOTLPSpanExporter(endpoint=endpoint)
    try:
        assert exporter.export(spans).name == "SUCCESS"
    finally:
        exporter.shutdown()
    assert encoded == [2]
    assert bodies == [sdk_encode_spans(spans).SerializeToString()]
