"""Client-named URLs reach only public addresses (or allow-listed hosts), at every redirect, within size and time."""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import pytest

from ferryman.errors import InvalidRequestError
from ferryman.safe_fetch import FetchPolicy, fetch, is_public


@dataclass
class DocumentServer:
    """A tiny HTTP/1.1 server on 127.0.0.1.

    Paths: ``/doc``, ``/to?url=…`` (302), ``/big``, ``/endless``, ``/gzip``, ``/slow``.
    """

    port: int = 0
    hits: list[str] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        target = head.split(" ", 2)[1]
        path = urlsplit(target).path
        self.hits.append(path)
        if path == "/doc":
            writer.write(_response(200, b"the document text"))
        elif path == "/to":
            location = parse_qs(urlsplit(target).query)["url"][0]
            writer.write(_response(302, b"", f"Location: {location}\r\n"))
        elif path == "/big":
            writer.write(_response(200, b"x" * 1000))
        elif path == "/endless":  # no Content-Length: the body ends when the connection does
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
            for _ in range(100):
                writer.write(b"y" * 100)
                await writer.drain()
        elif path == "/gzip":  # ignores Accept-Encoding: identity; 2 kB inflating to 10 MB
            bomb = gzip.compress(b"z" * 10_000_000)
            writer.write(_response(200, bomb, "Content-Encoding: gzip\r\n"))
        elif path == "/slow":
            await self.release.wait()
        writer.close()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _response(status: int, body: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    return head.encode() + body


@pytest.fixture()
async def server() -> AsyncIterator[DocumentServer]:
    documents = DocumentServer()
    listener = await asyncio.start_server(documents.handle, "127.0.0.1", 0)
    documents.port = listener.sockets[0].getsockname()[1]
    yield documents
    documents.release.set()
    listener.close()
    await listener.wait_closed()


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.100.100.200", "0.0.0.0",
        "224.0.0.1", "240.0.0.1", "::1", "fe80::1", "fd00:ec2::254", "ff02::1", "::ffff:127.0.0.1", "::",
        # IPv6 forms that lead to an IPv4 address: NAT64, 6to4, IPv4-compatible, Teredo (client 127.0.0.1)
        "64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "2002:7f00:1::", "2002:a9fe:a9fe::1", "::7f00:1",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",
    ],
)  # fmt: skip
def test_non_public_addresses_are_recognised(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "2002:808:808::1"])
def test_public_addresses_are_recognised(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


@pytest.mark.anyio
async def test_loopback_is_refused_by_default_without_connecting(server: DocumentServer) -> None:
    with pytest.raises(InvalidRequestError, match="not a public address") as refused:
        await fetch(f"{server.base}/doc", FetchPolicy(), "documents")
    assert refused.value.field == "documents"
    assert server.hits == []


@pytest.mark.anyio
async def test_a_refusal_does_not_tell_the_client_where_a_name_resolves(server: DocumentServer) -> None:
    with pytest.raises(InvalidRequestError, match="not a public address") as refused:
        await fetch(f"http://localhost:{server.port}/doc", FetchPolicy())
    assert "127.0.0.1" not in refused.value.message and "::1" not in refused.value.message


@pytest.mark.anyio
async def test_a_compressed_answer_is_refused_rather_than_inflated(server: DocumentServer) -> None:
    policy = FetchPolicy(allowed_hosts=["127.0.0.1"], max_bytes=1_000_000)
    with pytest.raises(InvalidRequestError, match="gzip-encoded"):
        await fetch(f"{server.base}/gzip", policy)


@pytest.mark.anyio
async def test_an_allow_listed_host_is_fetched(server: DocumentServer) -> None:
    assert await fetch(f"{server.base}/doc", FetchPolicy(allowed_hosts=["127.0.0.1"])) == b"the document text"
    network = FetchPolicy(allowed_hosts=["127.0.0.0/8"])
    assert await fetch(f"http://localhost:{server.port}/doc", network) == b"the document text"


@pytest.mark.anyio
@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:{port}/doc"])
async def test_a_redirect_from_an_allowed_host_to_a_private_address_is_refused(
    server: DocumentServer, target: str
) -> None:
    policy = FetchPolicy(allowed_hosts=["localhost"])  # the name, not the address behind it
    url = f"http://localhost:{server.port}/to?url={target.format(port=server.port)}"
    with pytest.raises(InvalidRequestError, match="not a public address"):
        await fetch(url, policy)
    assert server.hits == ["/to"]


@pytest.mark.anyio
async def test_redirects_are_followed_hop_by_hop_and_bounded(server: DocumentServer) -> None:
    policy = FetchPolicy(allowed_hosts=["127.0.0.1"], max_redirects=1)
    once = f"{server.base}/to?url={server.base}/doc"
    assert await fetch(once, policy) == b"the document text"
    with pytest.raises(InvalidRequestError, match="more than 1 redirects"):
        await fetch(f"{server.base}/to?url={once}", policy)


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["/big", "/endless"])
async def test_a_body_over_the_size_cap_is_refused(server: DocumentServer, path: str) -> None:
    policy = FetchPolicy(allowed_hosts=["127.0.0.1"], max_bytes=500)
    with pytest.raises(InvalidRequestError, match="larger than 500 bytes"):
        await fetch(f"{server.base}{path}", policy)


@pytest.mark.anyio
async def test_a_fetch_over_the_time_cap_is_refused(server: DocumentServer) -> None:
    policy = FetchPolicy(allowed_hosts=["127.0.0.1"], timeout_seconds=0.2)
    with pytest.raises(InvalidRequestError, match="took longer than 0.2 s"):
        await fetch(f"{server.base}/slow", policy)


@pytest.mark.anyio
async def test_only_http_urls_with_a_host_are_fetched() -> None:
    for url in ("file:///etc/passwd", "gopher://127.0.0.1/", "http:///nohost"):
        with pytest.raises(InvalidRequestError):
            await fetch(url, FetchPolicy())
