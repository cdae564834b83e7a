"""An idle keep-alive connection outlives client pools' idle limit (httpx: 5 s), so reusing it never fails."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

from support import Proc

CLIENT_POOL_IDLE_SECONDS = 5.0


def _get(connection: socket.socket, host: str) -> bytes:
    connection.sendall(f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\nConnection: keep-alive\r\n\r\n".encode())
    received = b""
    while b"\r\n\r\n" not in received:
        piece = connection.recv(65536)
        if not piece:
            return received
        received += piece
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += connection.recv(65536)
    return head


def test_a_connection_idle_longer_than_client_pools_keep_theirs_is_still_served(
    server_proc: tuple[Proc, str],
) -> None:
    address = urlsplit(server_proc[1])
    assert address.hostname is not None and address.port is not None
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        assert _get(connection, address.netloc).startswith(b"HTTP/1.1 200")
        time.sleep(CLIENT_POOL_IDLE_SECONDS + 1)  # the idle time is what is under test
        assert _get(connection, address.netloc).startswith(b"HTTP/1.1 200")
