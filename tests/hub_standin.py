"""A stand-in for the Hugging Face Hub's file endpoints, served over real HTTP on a free port.

It answers what ``hf_hub_download`` asks: ``HEAD`` and ``GET``
``/{owner}/{name}/resolve/{revision}/{filename}``, with ``X-Repo-Commit``,
``ETag``/``X-Linked-Etag`` (the SHA-256, as for an LFS file), ``X-Linked-Size``,
``Content-Length``, and ``206`` answers to ``Range`` requests. It can require a
token, serve bytes that do not match the checksum it announces, and cut a body
once mid-way.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<filename>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-$")
_CHUNK = 1 << 20


@dataclass
class Seen:
    """One request the stand-in answered."""

    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names."""


@dataclass
class HubStandIn:
    """What the stand-in serves and how it misbehaves; the requests it saw.

    Attributes:
        files: ``(repo_id, filename)`` to the file served.
        token: When set, a request without ``Authorization: Bearer TOKEN`` gets 401.
        corrupt: Announce the real checksum but serve other bytes.
        cut_once: Cut the first ``GET`` body half-way (the connection closes).
    """

    files: dict[tuple[str, str], Path] = field(default_factory=dict)
    token: str | None = None
    corrupt: bool = False
    cut_once: bool = False
    seen: list[Seen] = field(default_factory=list)
    url: str = ""
    _digests: dict[Path, str] = field(default_factory=dict)

    def sha256(self, repo_id: str, filename: str) -> str:
        """The checksum announced for a file."""
        path = self.files[(repo_id, filename)]
        if path not in self._digests:
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
            self._digests[path] = digest.hexdigest()
        return self._digests[path]

    def gets(self) -> list[Seen]:
        """The ``GET`` requests seen."""
        return [request for request in self.seen if request.method == "GET"]


def _handler(hub: HubStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            return

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _answer(self, body: bool) -> None:
            hub.seen.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
            match = _RESOLVE.match(self.path)
            if hub.token is not None and self.headers.get("Authorization") != f"Bearer {hub.token}":
                self._error(401, "RepoNotFound", "Invalid credentials")
                return
            if match is None or (match["repo"], match["filename"]) not in hub.files:
                self._error(404, "EntryNotFound", "Entry not found")
                return
            path = hub.files[(match["repo"], match["filename"])]
            self._send_file(path, hub.sha256(match["repo"], match["filename"]), body)

        def _send_file(self, path: Path, sha256: str, body: bool) -> None:
            size = path.stat().st_size
            ranged = _RANGE.match(self.headers.get("Range", ""))
            start = int(ranged.group(1)) if ranged and body else 0
            self.send_response(206 if start else 200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{sha256}"')
            self.send_header("X-Linked-Etag", f'"{sha256}"')
            self.send_header("X-Linked-Size", str(size))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(size - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            self.end_headers()
            if body:
                self._send_body(path, start, size)

        def _send_body(self, path: Path, start: int, size: int) -> None:
            stop = size
            if hub.cut_once:
                hub.cut_once = False
                stop = start + (size - start) // 2
                self.close_connection = True
            with path.open("rb") as handle:
                handle.seek(start)
                remaining = stop - start
                while remaining > 0:
                    chunk = handle.read(min(_CHUNK, remaining))
                    if hub.corrupt:
                        chunk = bytes(byte ^ 0xFF for byte in chunk)
                    self.wfile.write(chunk)
                    remaining -= len(chunk)
            self.wfile.flush()

        def _error(self, status: int, code: str, message: str) -> None:
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


@contextmanager
def hub_standin(hub: HubStandIn) -> Iterator[HubStandIn]:
    """Serve ``hub`` on a free loopback port (its ``url``) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="hub-standin", daemon=True)
    thread.start()
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
