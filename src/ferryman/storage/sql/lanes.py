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
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Call = tuple[Callable[..., Any], tuple[Any, ...], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class ThreadLane:
    """A fixed number of threads, started at the first call, taking calls in order of arrival.

    A call whose caller was cancelled before a thread took it is not run (as an executor's queued work is
    not); one already running finishes, and its outcome is dropped. Once closed, a lane refuses calls.

    Args:
        threads: How many threads serve the lane (1: calls run one after another, in order).
        name: The threads' name (``<name>_<n>``).
    """

    def __init__(self, threads: int, name: str) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._size = threads
        self._name = name
        self._threads: list[threading.Thread] = []
        self._stop: weakref.finalize[Any, Any] | None = None
        self._closed = False
        # Held while a call is queued and while the lane closes: no call lands behind the threads' stop signs.
        self._lock = threading.Lock()

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """Run ``function(*args)`` on one of the lane's threads; its result, or what it raised.

        Raises:
            RuntimeError: the lane is closed.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the {self._name} threads are closed")
            if not self._threads:
                self._start()
            self._calls.put((function, args, loop, future))
        return await future

    def close(self) -> None:
        """Let the threads finish the calls queued before, then stop them; later calls are refused."""
        with self._lock:
            self._closed = True
            stop, self._stop, self._threads = self._stop, None, []
        if stop is not None:
            stop()

    def _start(self) -> None:
        for number in range(self._size):
            thread = threading.Thread(target=_serve, args=(self._calls,), name=f"{self._name}_{number}", daemon=True)
            thread.start()
            self._threads.append(thread)
        # Run at close, when the lane is collected unclosed, or at exit: the threads are daemons, so that a lane
        # nobody closed never holds the interpreter open, and at exit the calls already queued (a write under
        # way among them) still finish, as an executor's do. The threads hold the queue, not the lane.
        self._stop = weakref.finalize(self, _stop_threads, self._calls, list(self._threads))


def _serve(calls: queue.SimpleQueue[_Call | None]) -> None:
    while (call := calls.get()) is not None:
        function, args, loop, future = call
        if not future.cancelled():
            try:
                result = function(*args)
            except BaseException as exc:  # noqa: BLE001 - it is the caller's to handle, on its loop
                _answer(loop, _fail, future, exc)
            else:
                _answer(loop, _succeed, future, result)
            result = None
        # A thread waiting for its next call holds nothing of its last (a large read, a closed loop).
        del call, function, args, loop, future


def _stop_threads(calls: queue.SimpleQueue[_Call | None], threads: list[threading.Thread]) -> None:
    for _ in threads:
        calls.put(None)
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join()


def _answer(loop: asyncio.AbstractEventLoop, settle: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(settle, *args)
    except RuntimeError:
        pass  # the loop closed meanwhile: nobody waits for this outcome


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.cancelled():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if isinstance(exc, StopIteration):
        # A future refuses StopIteration (it would end the awaiting coroutine's generator): the caller would wait.
        exc = RuntimeError(f"the call raised StopIteration: {exc!r}")
    if not future.cancelled():
        future.set_exception(exc)
