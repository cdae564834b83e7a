"""A TCP relay between one replica and Redis that a test can hold and cut, as a slow, then broken, network would.

What the replica sends through a held link waits in the relay (its replies
from Redis still flow); cutting the link closes every connection, and what
waited is lost, as when a replica dies with writes in flight. Only the replica
given :meth:`RedisLink.through` URLs is affected: other tests sharing the Redis
are not paused.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

T = TypeVar("T")

_CHUNK = 65536
_WAIT_SECONDS = 10.0


class RedisLink:
    """A relay to the Redis at ``url`` (its host and port), on a free loopback port, run on a thread of its own.

    Use it as a context manager (it stops on exit).
    """

    def __init__(self, url: str) -> None:
        target = urlsplit(url)
        self._host, self._port = target.hostname or "127.0.0.1", target.port or 6379
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="redis-link", daemon=True)
        self._thread.start()
        self._links: set[asyncio.Task[None]] = set()
        self._flowing = self._call(self._open())
        self._server = self._call(asyncio.start_server(self._relay, "127.0.0.1", 0))
        self.port: int = self._server.sockets[0].getsockname()[1]

    def __enter__(self) -> RedisLink:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def through(self, url: str) -> str:
        """``url`` (a ``redis://`` URL of the same Redis, with its path and query) through this relay."""
        parts = urlsplit(url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{self.port}" if auth else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def hold(self, seconds: float) -> None:
        """For ``seconds``, what the replica sends to Redis waits in the relay (returns at once)."""

        async def hold() -> None:
            self._flowing.clear()
            self._loop.call_later(seconds, self._flowing.set)

        self._call(hold())

    def cut(self) -> None:
        """Close every connection now, dropping what waits; later connections flow freely."""
        self._call(self._cut())

    def close(self) -> None:
        """Cut every connection and stop relaying."""
        if self._thread.is_alive():
            self.cut()
            self._server.close()
            self._call(self._server.wait_closed())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_WAIT_SECONDS)
            self._loop.close()

    def _call(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(_WAIT_SECONDS)

    @staticmethod
    async def _open() -> asyncio.Event:
        flowing = asyncio.Event()
        flowing.set()
        return flowing

    async def _cut(self) -> None:
        links = list(self._links)
        for link in links:
            link.cancel()
        await asyncio.gather(*links, return_exceptions=True)
        self._flowing.set()

    async def _relay(self, replica_in: asyncio.StreamReader, replica_out: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._links.add(task)
        redis_out: asyncio.StreamWriter | None = None
        try:
            redis_in, redis_out = await asyncio.open_connection(self._host, self._port)
            await asyncio.gather(self._pump(replica_in, redis_out, held=True), self._pump(redis_in, replica_out))
        except (OSError, asyncio.CancelledError):
            pass  # a cut, or either side went away: the connection ends
        finally:
            self._links.discard(task)
            for writer in (replica_out, redis_out):
                if writer is not None:
                    writer.transport.abort()  # what waits in the relay is lost, as on a broken network

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, held: bool = False) -> None:
        while data := await source.read(_CHUNK):
            if held:
                await self._flowing.wait()
            sink.write(data)
            await sink.drain()
        sink.transport.abort()
