"""Choosing the fan-out from ``--redis`` (or a ``redis://`` ``--db``)."""

from __future__ import annotations

from ferryman.extras import require
from ferryman.redis_url import split_prefix

from .base import Fanout, LocalFanout


def fanout_for(url: str | None) -> Fanout:
    """Redis fan-out for a URL (needs the ``redis`` extra); none for a single process."""
    if url is None:
        return LocalFanout()
    require("redis", "redis", "--redis (live events and notices between replicas)")
    from .redis_fanout import RedisFanout  # redis is an optional extra

    server, prefix = split_prefix(url)
    return RedisFanout(server, prefix)
