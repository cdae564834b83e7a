"""Fetching a URL that a client named, without letting it reach what only the server can reach.

A client-supplied URL fetched by the server is a server-side request forgery
risk: ``http://169.254.169.254/`` (cloud metadata), ``http://127.0.0.1:6379/``
or an intranet host. Every hop is checked after DNS resolution: the host's
addresses must all be public unless the operator allow-listed the host (or a
network holding the address). Redirects are followed here, one checked hop at
a time, and each connection goes to the address that was checked (with the
original ``Host`` header and TLS server name), so a DNS answer that changes
between the check and the connection (rebinding) cannot redirect it.
Environment proxies are ignored for the same reason. A URL is named in errors
and logs without its user info, query and fragment (:func:`~ferryman.logs.redacted_url`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ferryman.errors import InvalidRequestError
from ferryman.logs import redacted_url

if TYPE_CHECKING:
    # Imported where used: httpx (about 3 MiB, with the command-line modules it imports) loads with the first
    # fetch of a client-named URL, not with the server.
    import httpx

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class FetchPolicy(BaseModel):
    """What a server-side fetch of a client's URL may reach (the ``fetch:`` section of the config).

    Attributes:
        allowed_hosts: Host names (exact, case-insensitive) or networks (``10.0.0.0/8``,
            ``127.0.0.1``) that may be fetched even though they are not public.
        max_bytes: Largest body accepted.
        timeout_seconds: Time allowed for the whole fetch, redirects included.
        max_redirects: Redirects followed at most.
    """

    allowed_hosts: list[str] = Field(default_factory=list)
    max_bytes: int = Field(default=1_000_000, gt=0)
    timeout_seconds: float = Field(default=10.0, gt=0)
    max_redirects: int = Field(default=5, ge=0)

    def allows(self, host: str, address: IPAddress) -> bool:
        """Whether ``host`` at ``address`` may be fetched: public, or allow-listed by name or network."""
        name = host.lower().rstrip(".")
        for entry in self.allowed_hosts:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                if entry.lower().rstrip(".") == name:
                    return True
        return is_public(address)


_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def is_public(address: IPAddress) -> bool:
    """Whether an address is on the public internet (not loopback, private, link-local, multicast, reserved…).

    An IPv6 address that carries an IPv4 one (mapped, NAT64, 6to4, Teredo, IPv4-compatible) is public only if
    the IPv4 address it leads to is: ``64:ff9b::a9fe:a9fe`` reaches 169.254.169.254 through a NAT64 gateway.
    """
    if isinstance(address, ipaddress.IPv6Address) and address.sixtofour is not None:
        # 6to4 (2002::/16) by its IPv4 address alone: Python 3.13 counts the whole prefix private, 3.11 and 3.12 global.
        return is_public(address.sixtofour)
    if not (address.is_global and not (address.is_multicast or address.is_reserved or address.is_unspecified)):
        return False
    return all(is_public(inner) for inner in _embedded_ipv4(address))


def _embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to, by the standard embeddings."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    embedded = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
    if any(address in network for network in (*_NAT64, _IPV4_COMPATIBLE)):
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [inner for inner in embedded if inner is not None]


async def fetch(url: str, policy: FetchPolicy, field: str | None = None) -> bytes:
    """The body of ``url``, fetched within ``policy``.

    Raises:
        InvalidRequestError: the URL is refused, unreachable, too slow, too large or not a success
            (``field`` names the request field that held it).
    """
    try:
        async with asyncio.timeout(policy.timeout_seconds):
            return await _fetch(url, policy, field)
    except TimeoutError as exc:
        raise InvalidRequestError(
            f"fetching {redacted_url(url)} took longer than {policy.timeout_seconds:g} s", field
        ) from exc


async def _fetch(url: str, policy: FetchPolicy, field: str | None) -> bytes:
    import httpx

    async with httpx.AsyncClient(timeout=policy.timeout_seconds, trust_env=False) as client:
        for _ in range(policy.max_redirects + 1):
            target = _parsed(url, field)
            addresses = await _checked_addresses(target, policy, field)
            response = await _send(client, target, addresses, field)
            try:
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    url = str(target.join(location))
                    continue
                if not response.is_success:
                    raise InvalidRequestError(f"could not fetch {_shown(target)}: HTTP {response.status_code}", field)
                return await _body(response, target, policy.max_bytes, field)
            finally:
                await response.aclose()
    raise InvalidRequestError(f"could not fetch {redacted_url(url)}: more than {policy.max_redirects} redirects", field)


def _shown(target: httpx.URL) -> str:
    return redacted_url(str(target))


def _parsed(url: str, field: str | None) -> httpx.URL:
    import httpx

    try:
        target = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise InvalidRequestError(f"invalid URL: {exc}", field) from exc
    if target.scheme not in ("http", "https") or not target.host:
        raise InvalidRequestError(f"only http(s) URLs with a host can be fetched, not {redacted_url(url)!r}", field)
    return target


async def _checked_addresses(target: httpx.URL, policy: FetchPolicy, field: str | None) -> list[IPAddress]:
    port = target.port or (443 if target.scheme == "https" else 80)
    return await checked_addresses(target.host, port, policy, field, f"fetch {_shown(target)}")


async def checked_addresses(
    host: str, port: int, policy: FetchPolicy, field: str | None, purpose: str
) -> list[IPAddress]:
    """The addresses ``host`` resolves to, every one allowed by ``policy`` (connect only to these: a later
    DNS answer is never asked again).

    Args:
        host: The host name or address.
        port: The port to connect to.
        policy: Which hosts and addresses may be reached.
        field: The request field that named the URL (for the error).
        purpose: What the connection is for, as the error says it ("fetch https://…", "connect to …");
            never a URL carrying credentials.

    Raises:
        InvalidRequestError: the host does not resolve, or resolves to an address the policy refuses.
    """
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise InvalidRequestError(f"could not resolve {host}: {exc}", field) from exc
    addresses = _unique(ipaddress.ip_address(info[4][0]) for info in infos)
    refused = [address for address in addresses if not policy.allows(host, address)]
    if refused:
        # The address stays in the server's log: telling the client would map internal names for it.
        log.warning("refused to %s: %s resolves to non-public %s", purpose, host, refused[0])
        raise InvalidRequestError(
            f"refused to {purpose}: {host} is not a public address "
            "(an operator can allow the host in the config's fetch.allowed_hosts)",
            field,
        )
    return addresses


def _unique(addresses: Iterable[IPAddress]) -> list[IPAddress]:
    return list(dict.fromkeys(addresses))


async def _send(
    client: httpx.AsyncClient, target: httpx.URL, addresses: list[IPAddress], field: str | None
) -> httpx.Response:
    """Connect to the checked addresses in turn (never to a fresh DNS answer), naming the host as asked."""
    import httpx

    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    failure: Exception | None = None
    for address in addresses:
        request = client.build_request(
            "GET",
            target.copy_with(host=str(address)),
            # Identity encoding: the size cap counts the bytes that arrive, not what they inflate to.
            headers={"Host": target.netloc.decode(), "Accept-Encoding": "identity"},
            extensions=extensions,
        )
        try:
            return await client.send(request, stream=True)
        except httpx.ConnectError as exc:
            failure = exc
        except httpx.HTTPError as exc:
            raise InvalidRequestError(f"could not fetch {_shown(target)}: {exc}", field) from exc
    raise InvalidRequestError(f"could not fetch {_shown(target)}: {failure}", field)


async def _body(response: httpx.Response, target: httpx.URL, max_bytes: int, field: str | None) -> bytes:
    import httpx

    too_large = f"{_shown(target)} is larger than {max_bytes} bytes"
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise InvalidRequestError(f"{_shown(target)} answered {encoding}-encoded although asked for identity", field)
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise InvalidRequestError(too_large, field)
    body = bytearray()
    try:
        async for piece in response.aiter_raw():
            body += piece
            if len(body) > max_bytes:
                raise InvalidRequestError(too_large, field)
    except httpx.HTTPError as exc:
        raise InvalidRequestError(f"could not read {_shown(target)}: {exc}", field) from exc
    return bytes(body)
