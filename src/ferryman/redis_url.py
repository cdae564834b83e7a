"""Redis URLs as ``--db`` and ``--redis`` take them (the server's URL, plus an optional key prefix), and clients.

``redis://HOST:6379/0?prefix=team-a:`` keeps every key (and channel) of this
deployment under ``team-a:``, so that several deployments can share one Redis
database; without it the prefix is ``ferryman:``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    from redis.asyncio import Redis

DEFAULT_PREFIX = "ferryman:"


def split_prefix(url: str) -> tuple[str, str]:
    """The URL to connect to (without ``prefix``) and the key prefix it names."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefix = next((value for key, value in query if key == "prefix"), DEFAULT_PREFIX)
    rest = urlencode([(key, value) for key, value in query if key != "prefix"])
    return urlunsplit(parts._replace(query=rest)), prefix


def connect(url: str, max_connections: int, wait_seconds: float = 30.0) -> Redis:
    """A client whose pool, once ``max_connections`` are busy, waits for one to come free instead of failing.

    ``?max_connections=N`` in the URL overrides the size.
    """
    from redis.asyncio import BlockingConnectionPool, Redis  # redis is an optional extra

    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=wait_seconds, decode_responses=True
    )
    return Redis.from_pool(pool)
