"""Choosing the fan-out and the quota counters from ``--redis`` (or a ``redis://`` ``--db``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from limits.aio.storage import Storage

from ferryman.extras import require
from ferryman.redis_url import split_prefix

from .base import Fanout, LocalFanout

if TYPE_CHECKING:
    from .redis_quotas import RedisTurnSlots


def fanout_for(url: str | None) -> Fanout:
    """Redis fan-out for a URL (needs the ``redis`` extra); none for a single process."""
    if url is None:
        return LocalFanout()
    require("redis", "redis", "--redis (live events and notices between replicas)")
    from .redis_fanout import RedisFanout  # redis is an optional extra

    server, prefix = split_prefix(url)
    return RedisFanout(server, prefix)


def quota_counters_for(
    url: str | None, lease_seconds: float = 30.0
) -> Callable[[], tuple[Storage, RedisTurnSlots]] | None:
    """What makes the quota counters replicas share in the Redis at ``url``; None for a single process.

    The counters connect only when made (and need the ``redis`` extra then): a server whose settings limit
    nobody never does. ``lease_seconds`` bounds how long the slots of a replica that died stay taken.
    """
    if url is None:
        return None

    def counters() -> tuple[Storage, RedisTurnSlots]:
        require("redis", "redis", "--redis (quotas shared by replicas)")
        from .redis_quotas import redis_counters  # redis is an optional extra

        return redis_counters(*split_prefix(url), lease_seconds=lease_seconds)

    return counters
