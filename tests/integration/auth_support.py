"""An identity provider stand-in on 127.0.0.1 (its JWKS and its introspection endpoint), and tokens it signs.

The server runs in a thread of the test process (the standard library's
HTTP server): the authenticators under test reach it over a real socket, as
they reach a real provider.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

ISSUER = "https://idp.test"
AUDIENCE = "ferryman"
CLIENT_ID, CLIENT_SECRET = "ferryman-client", "s3cret-client"


@dataclass
class SigningKey:
    """An RSA key and the id the JWKS publishes it under."""

    kid: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    private: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))

    def jwk(self) -> dict[str, Any]:
        """The public key as a JWK."""
        return {**json.loads(RSAAlgorithm.to_jwk(self.private.public_key())), "kid": self.kid, "use": "sig"}

    def token(self, kid: str | None = None, **claims: Any) -> str:
        """A JWT signed by this key: valid for ten minutes for ``alice`` unless ``claims`` say otherwise."""
        now = int(time.time())
        body = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, **claims}
        return jwt.encode(body, self.private, algorithm="RS256", headers={"kid": kid or self.kid})


@dataclass
class Provider:
    """What the stand-in serves: the published keys, the active opaque tokens, and counts of requests."""

    url: str
    keys: list[SigningKey]
    active: dict[str, dict[str, Any]] = field(default_factory=dict)
    jwks_reads: int = 0
    introspections: int = 0

    @property
    def jwks_uri(self) -> str:
        return f"{self.url}/jwks"

    @property
    def introspection_url(self) -> str:
        return f"{self.url}/introspect"


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            provider.jwks_reads += 1
            self._answer(200, {"keys": [key.jwk() for key in provider.keys]})

        def do_POST(self) -> None:
            provider.introspections += 1
            expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
            if self.headers.get("Authorization") != f"Basic {expected}":
                self._answer(401, {"error": "invalid_client"})
                return
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            token = form.get("token", [""])[0]
            self._answer(
                200, {"active": True, **provider.active[token]} if token in provider.active else {"active": False}
            )

    return Handler


@contextmanager
def identity_provider() -> Iterator[Provider]:
    """The stand-in, serving one signing key, until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    provider = Provider(f"http://127.0.0.1:{server.server_address[1]}", [SigningKey()])
    server.RequestHandlerClass = _handler(provider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
