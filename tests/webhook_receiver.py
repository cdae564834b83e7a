"""A webhook receiver on loopback for the tests: a real HTTP server in a thread, recording what it is posted.

Each POST is kept (headers and body) and answered with the next status of its
script (200 once the script is used up). A test waits on its condition, not on
a clock: :meth:`Receiver.wait_for` returns once enough requests arrived.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook

WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class Posted:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes

    def event(self) -> dict[str, Any]:
        """The body as JSON."""
        value: dict[str, Any] = json.loads(self.body)
        return value

    def verified(self, secret: str) -> dict[str, Any]:
        """The event, once its Standard Webhooks signature verifies under ``secret`` (else it raises)."""
        value: dict[str, Any] = Webhook(secret).verify(self.body, self.headers)
        return value


class Receiver:
    """The server and what it received.

    Args:
        statuses: What the first requests are answered, in order (then 200).
        port: The port to listen on (0: any free one).
    """

    def __init__(self, statuses: tuple[int, ...] = (), port: int = 0) -> None:
        self.posted: list[Posted] = []
        self._statuses = list(statuses)
        self._arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver._arrived:
                    status = receiver._statuses.pop(0) if receiver._statuses else 200
                    receiver.posted.append(Posted(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    receiver._arrived.notify_all()
                self.send_response(status)
                if 300 <= status < 400:  # a redirect to itself elsewhere: a client that followed it is seen
                    self.send_header("Location", "/redirected")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks?token=secret-token"

    def wait_for(self, count: int, timeout: float = WAIT_SECONDS) -> list[Posted]:
        """The requests received, once at least ``count`` arrived.

        Raises:
            AssertionError: fewer arrived within ``timeout`` seconds.
        """
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.posted) >= count, timeout):
                raise AssertionError(f"{len(self.posted)} webhook requests arrived, not {count}")
            return list(self.posted)


@contextmanager
def receiving(statuses: tuple[int, ...] = (), port: int = 0) -> Iterator[Receiver]:
    """A receiver serving on loopback (on ``port``, or any free one) until the block ends."""
    receiver = Receiver(statuses, port)
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join()
