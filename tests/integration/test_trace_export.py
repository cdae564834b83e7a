"""Traces leave a real ``ferryman serve`` over OTLP/HTTP when OpenTelemetry's standard variables say so.

A tiny collector on loopback (an HTTP server in this test) receives the exporter's protobuf POSTs
to ``/v1/traces`` and parses them with ``opentelemetry-proto``; the server is configured by nothing
but ``OTEL_*`` variables.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ferryman.testing import ScriptedServerClient
from support import Proc, create_agent, create_session, ferryman_server, running

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
SERVER_SPAN = "POST /v1/agents/{agent_id}/session/{session_id}/turn"
TURN_SPANS = {SERVER_SPAN, "invoke_agent", "chat scripted-model"}
TRACEPARENT = f"00-{CALLER_TRACE}-b7ad6b7169203331-01"


class Collector:
    """The spans received, with their resource's attributes, and an event per export."""

    def __init__(self) -> None:
        self.spans: list[tuple[dict[str, Any], Any]] = []
        self.paths: list[str] = []
        self.changed = threading.Condition()

    def receive(self, path: str, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.changed:
            self.paths.append(path)
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    self.spans += [(resource, span) for span in scope_spans.spans]
            self.changed.notify_all()

    def wait_for(self, names: set[str], timeout: float = 20.0) -> list[tuple[dict[str, Any], Any]]:
        """Every span received, once spans of all ``names`` have arrived."""
        with self.changed:
            arrived = self.changed.wait_for(lambda: names <= {s.name for _, s in self.spans}, timeout)
            assert arrived, f"not all of {names} exported; got {[s.name for _, s in self.spans]}"
            return list(self.spans)


@pytest.fixture
def collector() -> Iterator[tuple[Collector, str]]:
    received = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.receive(self.path, body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_turn_is_exported_to_the_collector_the_variables_name(
    tmp_path: Path,
    scripted_proc: tuple[Proc, str],
    served_model: ScriptedServerClient,
    collector: tuple[Collector, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received, endpoint = collector
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "ferryman-under-test")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    proc, base = ferryman_server(tmp_path, scripted_proc[1], tmp_path / "export.db")
    with running(proc), httpx.Client(base_url=base, timeout=30) as http:
        agent_id = create_agent(http)
        session_id = create_session(http, agent_id)
        served_model.enqueue_text("Hello there.")
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
        turn = http.post(url, json=body, headers={"traceparent": TRACEPARENT})
        assert turn.status_code == 200, turn.text
        spans = received.wait_for(TURN_SPANS)

    assert set(received.paths) == {"/v1/traces"}
    in_trace = {span.name: (resource, span) for resource, span in spans if span.trace_id.hex() == CALLER_TRACE}
    assert set(in_trace) == TURN_SPANS
    resource, agent = in_trace["invoke_agent"]
    assert resource["service.name"] == "ferryman-under-test"
    attributes = {a.key: a.value for a in agent.attributes}
    assert attributes["gen_ai.agent.id"].string_value == agent_id
    assert attributes["gen_ai.conversation.id"].string_value == session_id
    assert agent.parent_span_id == in_trace[SERVER_SPAN][1].span_id
    _, chat = in_trace["chat scripted-model"]
    assert chat.parent_span_id == agent.span_id
    # The model server was asked in the chat span's name.
    [request] = served_model.requests()
    assert request["headers"]["traceparent"] == f"00-{CALLER_TRACE}-{chat.span_id.hex()}-01"
