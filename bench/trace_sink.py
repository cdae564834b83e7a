"""A loopback OTLP/HTTP sink for ``--traces``: takes the server's span exports and counts them, nothing else.

It stands in for a collector on the same host, so that the run measures what exporting costs the
server (building spans, batching, serialising, posting), not what a collector does with them.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .procs import HOST


class TraceSink:
    """An HTTP server on loopback answering every POST with an empty OTLP success, in a thread of its own."""

    def __init__(self) -> None:
        counts = self.counts = {"exports": 0, "bytes": 0}
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the exporter's session expects

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                size = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(size)
                with lock:
                    counts["exports"] += 1
                    counts["bytes"] += size
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="trace-sink", daemon=True)

    @property
    def endpoint(self) -> str:
        """The base URL to give as ``OTEL_EXPORTER_OTLP_ENDPOINT``."""
        return f"http://{HOST}:{self._server.server_address[1]}"

    def start(self) -> TraceSink:
        """Start serving."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
