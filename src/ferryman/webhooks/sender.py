"""Posting one webhook event: the URL checked like every URL a caller makes the server reach, then one POST.

The host's addresses are checked against ``fetch.allowed_hosts`` (public only,
unless allowed) when the request names the webhook and again at every attempt,
and the connection goes to an address that was checked (with the original
``Host`` header and TLS server name), as :mod:`ferryman.safe_fetch` does. A
redirect is not followed: it is an answer other than 2xx, so the attempt fails.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ferryman.api.webhooks import WebhookAttempt
from ferryman.errors import InvalidRequestError
from ferryman.safe_fetch import FetchPolicy, IPAddress, checked_addresses

if TYPE_CHECKING:
    # Imported where used: httpx (about 3 MiB, with the command-line modules it imports) loads with the first
    # webhook URL read or posted to, not with the server.
    import httpx

log = logging.getLogger(__name__)

FIELD = "webhook"
"""The request field that names a run's webhook."""
MAX_ERROR_CHARS = 500
"""The longest error an attempt records."""


def shown_url(url: str) -> str:
    """``url`` as logs, errors and the API show it: scheme, host and port only (a webhook's path may be its
    secret, as Slack's and Discord's are; user info and query may be too)."""
    import httpx

    try:
        target = httpx.URL(url)
    except httpx.InvalidURL:
        return "<invalid URL>"
    host = f"[{target.host}]" if ":" in target.host else target.host
    port = f":{target.port}" if target.port else ""
    return f"{target.scheme}://{host}{port}/…" if target.scheme and host else "<invalid URL>"


def parsed_url(url: str, field: str = FIELD) -> httpx.URL:
    """``url`` parsed, once it is ``http(s)`` with a host.

    Raises:
        InvalidRequestError: it is not.
    """
    import httpx

    try:
        target = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise InvalidRequestError(f"invalid webhook URL: {exc}", field) from exc
    if target.scheme not in ("http", "https") or not target.host:
        raise InvalidRequestError(f"a webhook must be an http(s) URL with a host, not {shown_url(url)!r}", field)
    return target


async def check_url(url: str, policy: FetchPolicy, seconds: float, field: str = FIELD) -> list[IPAddress]:
    """The addresses a webhook's host resolves to, once every one is one ``policy`` allows, looked up within
    ``seconds``.

    Raises:
        InvalidRequestError: the URL is malformed, or its host does not resolve in time, or resolves to an
            address the policy refuses: one message for all three (the message names ``fetch.allowed_hosts``),
            so that the answer does not tell which internal names exist.
    """
    target = parsed_url(url, field)
    port = target.port or (443 if target.scheme == "https" else 80)
    purpose = f"deliver webhooks to {shown_url(url)}"
    try:
        async with asyncio.timeout(seconds):
            return await checked_addresses(target.host, port, policy, field, purpose)
    except (InvalidRequestError, TimeoutError) as exc:
        log.info("webhook %s refused: %s", shown_url(url), exc)
        raise InvalidRequestError(
            f"refused to {purpose}: its host does not resolve (within {seconds:g} s), or not to a public address "
            "(an operator can allow the host in the config's fetch.allowed_hosts)",
            field,
        ) from None


async def post(
    client: httpx.AsyncClient, url: str, body: str, headers: dict[str, str], policy: FetchPolicy, seconds: float
) -> WebhookAttempt:
    """Make one attempt to post ``body`` to ``url`` within ``seconds``: its outcome, never an exception (but
    cancellation)."""
    import httpx

    at = time.time()
    try:
        async with asyncio.timeout(seconds):
            status = await _send(client, url, body, headers, policy, seconds)
    except TimeoutError:
        return WebhookAttempt(at=at, error=f"no answer within {seconds:g} s (the setting webhooks.timeout_seconds)")
    except InvalidRequestError as exc:
        return WebhookAttempt(at=at, error=exc.message[:MAX_ERROR_CHARS])
    except httpx.HTTPError as exc:
        return WebhookAttempt(at=at, error=f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS])
    if 200 <= status < 300:
        return WebhookAttempt(at=at, status_code=status)
    return WebhookAttempt(at=at, status_code=status, error=f"the receiver answered HTTP {status}")


async def _send(
    client: httpx.AsyncClient, url: str, body: str, headers: dict[str, str], policy: FetchPolicy, seconds: float
) -> int:
    """POST to the first checked address that accepts a connection; the answer's status."""
    import httpx

    target = parsed_url(url)
    addresses = await check_url(url, policy, seconds)
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    failure: Exception | None = None
    for address in addresses:
        request = client.build_request(
            "POST",
            target.copy_with(host=str(address)),
            content=body.encode(),
            headers={
                **headers,
                "Host": target.netloc.decode(),
                "Content-Type": "application/json",
                "User-Agent": "ferryman-webhooks",
            },
            extensions=extensions,
        )
        try:
            response = await client.send(request, stream=True)  # the answer's body is never read
        except httpx.ConnectError as exc:
            failure = exc
            continue
        await response.aclose()
        return response.status_code
    raise InvalidRequestError(f"could not connect to {shown_url(url)}: {failure}", FIELD)
