"""Fan-out over Redis: one stream per turn or response, and a channel for notices.

An event numbered ``n`` is stream entry ``n-1`` (its JSON data in field
``d``) and the end of a run after event ``n`` is entry ``n-2``, so entry ids
are the event numbers themselves: a follower resumes after event ``n`` by
reading after id ``n-1``, and a replica that publishes an event twice is
refused by Redis instead of duplicating it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any, get_args

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ferryman.redis_url import connect
from ferryman.storage.base import StoredEvent

from .base import (
    CancelTurns,
    DeletedKind,
    FanoutEntry,
    ModelsChanged,
    Notice,
    NoticeHandler,
    Quiet,
    RecordDeleted,
    RunEnded,
)

log = logging.getLogger(__name__)

_EVENT, _END = "1", "2"
_BATCH = 512
_CLOSE_SECONDS = 2.0


class RedisFanout:
    """Streams and notices shared by every replica that names the same Redis.

    Args:
        url: ``redis://…`` (or ``rediss://…``).
        prefix: Namespace of every key and channel this uses.
        block_seconds: How long a follower waits for news before checking on the turn.
        live_ttl: Seconds a stream is kept after its latest event (bounds what a dead replica leaves).
        ended_ttl: Seconds a stream is kept after a run ended (finished turns replay from storage).
    """

    def __init__(
        self,
        url: str,
        prefix: str = "ferryman:",
        block_seconds: float = 1.0,
        live_ttl: int = 86_400,
        ended_ttl: int = 600,
    ) -> None:
        self._url = url
        self._prefix = prefix
        self._block_ms = int(block_seconds * 1000)
        self._live_ttl = live_ttl
        self._ended_ttl = ended_ttl
        self._queue: asyncio.Queue[tuple[str, str, int, str]] = asyncio.Queue()
        self._client: aioredis.Redis | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def _redis(self) -> aioredis.Redis:
        if self._client is None:
            raise RuntimeError("the Redis fan-out is not open")
        return self._client

    def _key(self, stream: str) -> str:
        return f"{self._prefix}stream:{stream}"

    async def open(self, on_notice: NoticeHandler) -> None:
        """Connect, start sending queued events and start listening for notices."""
        # Each follower holds a connection while it waits on its stream: a wide pool.
        self._client = connect(self._url, max_connections=1024)
        await self._redis.ping()
        pubsub = await self._subscribe()
        self._tasks = [
            asyncio.create_task(self._send_forever(), name="fanout-send"),
            asyncio.create_task(self._listen_forever(pubsub, on_notice), name="fanout-notices"),
        ]

    async def _subscribe(self) -> Any:
        pubsub: Any = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self._channel)
        except BaseException:
            await pubsub.aclose()
            raise
        return pubsub

    @property
    def _channel(self) -> str:
        return f"{self._prefix}notices"

    async def close(self) -> None:
        """Send what is still queued, stop listening and disconnect."""
        with contextlib.suppress(TimeoutError):  # a Redis that went away must not hold the shutdown
            async with asyncio.timeout(_CLOSE_SECONDS):
                await self._queue.join()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._client is not None:
            leftover = self._drain([])
            if leftover:
                with contextlib.suppress(RedisError, OSError):
                    await self._send(leftover)
            await self._client.aclose()
            self._client = None

    def publish(self, stream: str, seq: int, data: str) -> None:
        """Queue an event; a background task sends queued events in batches."""
        self._queue.put_nowait((_EVENT, stream, seq, data))

    def end_run(self, stream: str, seq: int) -> None:
        """Queue the end of a run after event ``seq``."""
        self._queue.put_nowait((_END, stream, seq, ""))

    async def follow(self, stream: str, after: int) -> AsyncIterator[FanoutEntry]:
        """Entries after event ``after``: the first read does not wait, later ones wait up to ``block_seconds``."""
        key, last_id = self._key(stream), f"{after}-{_EVENT}" if after >= 0 else "0-0"
        block: int | None = None
        while True:
            try:
                reply = await self._redis.xread({key: last_id}, count=_BATCH, block=block)
                known = bool(reply) or bool(await self._redis.exists(key))
            except (RedisError, OSError) as exc:
                log.warning("following stream %s failed: %s", stream, exc)
                await asyncio.sleep(self._block_ms / 1000)  # back off before trying Redis again
                yield Quiet(known=False)
                continue
            block = self._block_ms
            if not reply:
                yield Quiet(known=known)
                continue
            for entry_id, fields in _entries(reply):
                last_id = entry_id
                seq, kind = entry_id.split("-")
                yield StoredEvent(int(seq), fields["d"]) if kind == _EVENT else RunEnded(int(seq))

    async def notify(self, notice: Notice) -> None:
        """Send a notice to every replica (this one too)."""
        await self._redis.publish(self._channel, _encode(notice))

    async def recorded(self, stream: str, after: int) -> list[StoredEvent]:
        """The events the stream holds numbered above ``after``."""
        reply = await self._redis.xrange(self._key(stream), min=f"{after + 1}-0", max="+")
        events: list[StoredEvent] = []
        for entry_id, fields in _entries([[stream, reply]]):
            seq, kind = entry_id.split("-")
            if kind == _EVENT:
                events.append(StoredEvent(int(seq), fields["d"]))
        return events

    async def wait_run_end(self, stream: str) -> None:
        """Follow the stream from its latest entry until a run ends there."""
        latest = await self._redis.xrevrange(self._key(stream), count=1)
        if not latest:
            return
        entry_id = str(latest[0][0])
        if entry_id.endswith(f"-{_END}"):
            return
        async for entry in self.follow(stream, int(entry_id.split("-")[0])):
            if isinstance(entry, RunEnded):
                return

    async def _listen_forever(self, pubsub: Any, on_notice: NoticeHandler) -> None:
        """Listen, and after losing the channel subscribe again (backing off while Redis is away)."""
        while True:
            await self._listen(pubsub, on_notice)
            while True:
                await asyncio.sleep(self._block_ms / 1000)  # back off before reconnecting
                try:
                    pubsub = await self._subscribe()
                    break
                except (RedisError, OSError) as exc:
                    log.warning("notice channel still unreachable: %s", exc)
            # What was said while this replica was away is lost: re-read what can be re-read,
            # and forget every cached record (one may have been deleted meanwhile).
            await self._deliver(on_notice, ModelsChanged())
            await self._deliver(on_notice, RecordDeleted(None))

    async def _listen(self, pubsub: Any, on_notice: NoticeHandler) -> None:
        try:
            async for message in pubsub.listen():
                notice = _decode(message["data"])
                if notice is None:
                    log.warning("ignored an unknown notice: %.200s", message["data"])
                else:
                    await self._deliver(on_notice, notice)
        except (RedisError, OSError) as exc:
            log.warning("lost the notice channel: %s; subscribing again", exc)
        finally:
            with contextlib.suppress(RedisError, OSError):
                await pubsub.aclose()

    @staticmethod
    async def _deliver(on_notice: NoticeHandler, notice: Notice) -> None:
        try:
            await on_notice(notice)
        except Exception:
            log.exception("acting on %s failed", notice)

    async def _send_forever(self) -> None:
        while True:
            batch = self._drain([await self._queue.get()])
            try:
                await self._send(batch)
            except (RedisError, OSError) as exc:
                log.warning("%d live event(s) not fanned out: %s", len(batch), exc)
            finally:
                for _ in batch:
                    self._queue.task_done()

    def _drain(self, batch: list[tuple[str, str, int, str]]) -> list[tuple[str, str, int, str]]:
        while len(batch) < _BATCH and not self._queue.empty():
            batch.append(self._queue.get_nowait())
        return batch

    async def _send(self, batch: list[tuple[str, str, int, str]]) -> None:
        pipe = self._redis.pipeline(transaction=False)
        for kind, stream, seq, data in batch:
            key = self._key(stream)
            fields = {"d": data} if kind == _EVENT else {"end": "1"}
            pipe.xadd(key, fields, id=f"{seq}-{kind}")  # type: ignore[arg-type]
            pipe.expire(key, self._live_ttl if kind == _EVENT else self._ended_ttl)
        results = await pipe.execute(raise_on_error=False)
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            log.warning("%d fan-out write(s) refused: %s", len(failures), failures[0])


def _entries(reply: Any) -> list[tuple[str, dict[str, str]]]:
    """The entries of a one-stream XREAD reply (RESP2: ``[[key, entries]]``)."""
    return [(str(entry_id), dict(fields)) for entry_id, fields in reply[0][1]]


def _encode(notice: Notice) -> str:
    if isinstance(notice, CancelTurns):
        return json.dumps({"kind": "cancel", "owner": notice.owner, "reason": notice.reason})
    if isinstance(notice, RecordDeleted):
        return json.dumps({"kind": "deleted", "id": notice.record_id, "of": notice.kind})
    return json.dumps({"kind": "models"})


def _decode(data: str) -> Notice | None:
    """A notice, or None for one this version does not know (sent by a newer replica)."""
    try:
        body = json.loads(data)
        if body["kind"] == "cancel":
            return CancelTurns(str(body["owner"]), str(body["reason"]))
        if body["kind"] == "models":
            return ModelsChanged()
        if body["kind"] == "deleted":
            of = body.get("of")
            return RecordDeleted(
                None if body["id"] is None else str(body["id"]), of if of in get_args(DeletedKind) else None
            )
    except (ValueError, KeyError, TypeError):
        return None
    return None
