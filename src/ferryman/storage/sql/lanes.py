"""Threads that run blocking calls for the event loop: SQLite's writer and its readers.

A call is one hop each way: a queue into the lane's threads, and the loop's
``call_soon_threadsafe`` back. ``loop.run_in_executor`` makes the same hop through
a :class:`concurrent.futures.Future` (its lock and condition) chained to an
asyncio future: about twice the CPU per call, measured on the turn's path, where
every statement unit of SQLite is such a call.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Call = tuple[Callable[..., Any], tuple[Any, ...], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class ThreadLane:
    """A fixed number of threads, started at the first call, taking calls in order of arrival.

    A call whose caller was cancelled before a thread took it is not run (as an executor's queued work is
    not); one already running finishes, and its outcome is dropped.

    Args:
        threads: How many threads serve the lane (1: calls run one after another, in order).
        name: The threads' name (``<name>_<n>``).
    """

    def __init__(self, threads: int, name: str) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._size = threads
        self._name = name
        self._threads: list[threading.Thread] = []
        self._start_lock = threading.Lock()

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """Run ``function(*args)`` on one of the lane's threads; its result, or what it raised."""
        if not self._threads:
            self._start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((function, args, loop, future))
        return await future

    def close(self) -> None:
        """Let the threads finish the calls queued before, then stop them (a later call starts them again)."""
        with self._start_lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._calls.put(None)
        for thread in threads:
            thread.join()

    def _start(self) -> None:
        with self._start_lock:
            if self._threads:
                return
            for number in range(self._size):
                thread = threading.Thread(target=self._serve, name=f"{self._name}_{number}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            function, args, loop, future = call
            if future.cancelled():
                continue
            try:
                result = function(*args)
            except BaseException as exc:  # noqa: BLE001 - it is the caller's to handle, on its loop
                _answer(loop, _fail, future, exc)
            else:
                _answer(loop, _succeed, future, result)


def _answer(loop: asyncio.AbstractEventLoop, settle: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(settle, *args)
    except RuntimeError:
        pass  # the loop closed meanwhile: nobody waits for this outcome


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.cancelled():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.cancelled():
        future.set_exception(exc)
