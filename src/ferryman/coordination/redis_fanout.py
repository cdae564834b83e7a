"""Fan-out over Redis: one stream per turn or response, and a channel for notices.

An event numbered ``n`` is stream entry ``n-1`` (its JSON data in field
``d``) and the end of a run after event ``n`` is entry ``n-2``, so entry ids
are the event numbers themselves: a follower resumes after event ``n`` by
reading after id ``n-1``, and a replica that publishes an event twice is
refused by Redis instead of duplicating it.

The streams are the log a replica replays a dead one's turns from, so a
publisher's events are stored before they are released to its own readers:
the sender stores each batch, one script per stream, then tells each run's
:class:`LogWatcher` how far its events are stored. A batch that fails is
retried (an entry already there with the same content counts as stored), and
an entry whose number the stream holds with other content (another replica
failed the turn and ended the stream) is refused, with everything after it.
While Redis fails, what arrives joins the retry and the entries of runs already
settled (storage holds their events) are dropped, so memory stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any, get_args

import anyio
import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisError

from ferryman.redis_url import connect
from ferryman.storage.base import StoredEvent

from .base import (
    CancelTurns,
    DeletedKind,
    FanoutEntry,
    LogWatcher,
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
_SEND_SECONDS = 5.0
"""How long one batch may take before it is sent again (over a fresh connection)."""

_APPEND = """
local function at_or_below(id, top)
  local a, b = string.match(id, '^(%d+)-(%d+)$')
  local c, d = string.match(top, '^(%d+)-(%d+)$')
  a, b, c, d = tonumber(a), tonumber(b), tonumber(c), tonumber(d)
  return a < c or (a == c and b <= d)
end
local stored = 0
for i = 2, #ARGV, 3 do
  local added = redis.pcall('XADD', KEYS[1], ARGV[i], ARGV[i + 1], ARGV[i + 2])
  if type(added) == 'table' and added.err then
    local found = redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i])[1]
    if not found then
      local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
      if not top or not at_or_below(ARGV[i], top[1]) then
        if stored > 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
        return redis.error_reply(added.err)
      end
      break
    end
    if found[2][1] ~= ARGV[i + 1] or found[2][2] ~= ARGV[i + 2] then break end
  end
  stored = stored + 1
end
if stored > 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return stored
"""
"""Append entries (``ARGV``: seconds to keep the stream, then id, field, value of each, ids ascending).

Answers how many were appended, an entry already there with the same content
counting as appended (a retried batch); the first whose number the stream
holds with other content, or has passed, stops it. A write Redis refuses for
another reason (out of memory, a read-only replica, a permission) fails the
script, so that the batch is retried rather than taken for a refusal.
"""


@dataclass(frozen=True)
class _Entry:
    """An event (``kind`` ``_EVENT``, its data) or the end of a run (``_END``) queued for a stream."""

    kind: str
    stream: str
    seq: int
    data: str
    watcher: LogWatcher | None


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
        self._queue: asyncio.Queue[_Entry] = asyncio.Queue()
        self._client: aioredis.Redis | None = None
        self._script: AsyncScript | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._scopes: list[anyio.CancelScope] = []
        self._sending: list[_Entry] = []

    @property
    def _redis(self) -> aioredis.Redis:
        if self._client is None:
            raise RuntimeError("the Redis fan-out is not open")
        return self._client

    @property
    def _appending(self) -> AsyncScript:
        if self._script is None:
            raise RuntimeError("the Redis fan-out is not open")
        return self._script

    def _key(self, stream: str) -> str:
        return f"{self._prefix}stream:{stream}"

    async def open(self, on_notice: NoticeHandler) -> None:
        """Connect, start sending queued events and start listening for notices."""
        # Each follower holds a connection while it waits on its stream: a wide pool.
        self._client = connect(self._url, max_connections=1024)
        await self._redis.ping()
        self._script = self._redis.register_script(_APPEND)
        pubsub = await self._subscribe()
        # A cancel scope's cancellation is delivered again until its task leaves it; a plain
        # Task.cancel() is delivered once, and a blocked pub/sub read in redis-py can absorb it,
        # which held close() (and with it a replica's shutdown) forever.
        self._scopes = [anyio.CancelScope(), anyio.CancelScope()]
        self._tasks = [
            asyncio.create_task(_within(self._scopes[0], self._send_forever()), name="fanout-send"),
            asyncio.create_task(
                _within(self._scopes[1], self._listen_forever(pubsub, on_notice)), name="fanout-notices"
            ),
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
        for scope in self._scopes:
            scope.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._scopes = []
        self._tasks = []
        if self._client is not None:
            # The batch the sender was retrying goes first: sending only what came after it would
            # leave a gap in its streams.
            leftover, self._sending = self._drain(self._sending, limit=None), []
            if leftover:
                with contextlib.suppress(RedisError, OSError):
                    async with asyncio.timeout(_CLOSE_SECONDS):
                        await self._send(leftover)
            await self._client.aclose()
            self._client = None

    def publish(self, stream: str, seq: int, data: str, watcher: LogWatcher | None = None) -> None:
        """Queue an event; a background task stores queued events in batches, then tells their watchers."""
        self._queue.put_nowait(_Entry(_EVENT, stream, seq, data, watcher))

    def end_run(self, stream: str, seq: int, watcher: LogWatcher | None = None) -> None:
        """Queue the end of a run after event ``seq``."""
        self._queue.put_nowait(_Entry(_END, stream, seq, "", watcher))

    async def append(self, stream: str, first: int, events: list[str]) -> bool:
        """Store events numbered from ``first`` and the end of the run now, unless the stream holds ``first``."""
        entries = [_Entry(_EVENT, stream, first + i, data, None) for i, data in enumerate(events)]
        entries.append(_Entry(_END, stream, first + len(events) - 1, "", None))
        stored = await self._appending(keys=[self._key(stream)], args=self._append_args(entries))
        return int(stored) == len(entries)

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

    async def wait_run_end(self, stream: str) -> int | None:
        """Follow the stream from its latest entry until a run ends there; the events it held then (None: the
        stream is unknown)."""
        latest = await self._redis.xrevrange(self._key(stream), count=1)
        if not latest:
            return None
        seq, kind = str(latest[0][0]).split("-")
        if kind == _END:
            return int(seq) + 1
        async for entry in self.follow(stream, int(seq)):
            if isinstance(entry, RunEnded):
                return entry.seq + 1
        return None

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
            self._sending = self._drain([await self._queue.get()])
            taken = len(self._sending)
            try:
                while self._sending:  # a stream's later events wait until its earlier ones are stored
                    try:
                        async with asyncio.timeout(_SEND_SECONDS):  # a Redis that stopped answering
                            self._sending = await self._send(self._sending)
                    except (RedisError, OSError) as exc:
                        log.warning("%d live event(s) not stored yet, retrying: %s", len(self._sending), exc)
                    if self._sending:
                        await asyncio.sleep(self._block_ms / 1000)  # back off before trying Redis again
                        # What came meanwhile joins the retry, after it; a settled run's events are
                        # dropped (storage holds them), or a Redis away would cost memory without bound.
                        later = self._drain([], limit=None)
                        taken += len(later)
                        self._sending = [entry for entry in [*self._sending, *later] if not _settled(entry)]
            finally:
                for _ in range(taken):
                    self._queue.task_done()

    def _drain(self, batch: list[_Entry], limit: int | None = _BATCH) -> list[_Entry]:
        while (limit is None or len(batch) < limit) and not self._queue.empty():
            batch.append(self._queue.get_nowait())
        return batch

    async def _send(self, batch: list[_Entry]) -> list[_Entry]:
        """Store a batch, one script per stream, and tell the watchers; return the entries to retry."""
        streams: dict[str, list[_Entry]] = {}
        for entry in batch:
            if entry.watcher is None or not entry.watcher.lost:  # a run refused once writes nothing more
                streams.setdefault(entry.stream, []).append(entry)
        if not streams:
            return []
        results = await self._store(streams)
        if any(isinstance(result, NoScriptError) for result in results):  # a Redis new, restarted or flushed
            await self._redis.script_load(_APPEND)
            results = await self._store(streams)  # what the first try stored counts as stored again
        retry: list[_Entry] = []
        for entries, result in zip(streams.values(), results, strict=True):
            if isinstance(result, Exception):
                log.warning("%d live event(s) of %s not stored yet: %s", len(entries), entries[0].stream, result)
                retry.extend(entries)
            else:
                _tell(entries, int(result))
        return retry

    async def _store(self, streams: dict[str, list[_Entry]]) -> list[Any]:
        """Run the script on each stream's entries, in one round trip; the results, errors among them.

        The script goes by its digest, not through the pipeline's scripts: those cost a round trip
        (SCRIPT EXISTS) per batch, on the way of every event to its readers.
        """
        pipe = self._redis.pipeline(transaction=False)
        for stream, entries in streams.items():
            pipe.evalsha(self._appending.sha, 1, self._key(stream), *self._append_args(entries))
        results: list[Any] = await pipe.execute(raise_on_error=False)
        return results

    def _append_args(self, entries: list[_Entry]) -> list[str | int]:
        args: list[str | int] = [self._live_ttl if entries[-1].kind == _EVENT else self._ended_ttl]
        for entry in entries:
            field, value = ("d", entry.data) if entry.kind == _EVENT else ("end", "1")
            args += [f"{entry.seq}-{entry.kind}", field, value]
        return args


def _settled(entry: _Entry) -> bool:
    """Whether the entry's run ended: storage took its events, and no reader here waits on them."""
    return entry.watcher is not None and entry.watcher.closed


def _tell(entries: list[_Entry], stored: int) -> None:
    """Tell the watchers of a stream's entries that the first ``stored`` were stored and the others refused."""
    last: dict[LogWatcher, int] = {}
    for entry in entries[:stored]:
        if entry.kind == _EVENT and entry.watcher is not None:
            last[entry.watcher] = entry.seq
    for watcher, seq in last.items():
        watcher.stored(seq)
    if stored == len(entries):
        return
    first = entries[stored]
    log.warning(
        "stream %s holds another entry at %d-%s: this run's later events are dropped",
        first.stream,
        first.seq,
        first.kind,
    )
    refused: dict[LogWatcher, int] = {}
    for entry in entries[stored:]:
        if entry.watcher is not None:
            refused.setdefault(entry.watcher, entry.seq)
    for watcher, seq in refused.items():
        watcher.refused(seq)


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


async def _within(scope: anyio.CancelScope, work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` until it ends or ``scope`` is cancelled."""
    with scope:
        await work
