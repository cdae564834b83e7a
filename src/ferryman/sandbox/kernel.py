"""One session's kernel process: starting it, sending it code, and killing it at a limit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferryman.sandbox_settings import SandboxSettings

from . import scratch
from .confinement import ConfinementUnavailable, Launch, launch
from .limits import Limit, hint, killed

_HEADER = struct.Struct(">I")
_STDERR_TAIL = 2000
_EXIT_WAIT_SECONDS = 5.0
_START_SECONDS = 20.0
_WATCH_SECONDS = 0.05
"""How often the files in a sandbox's own scratch space and ``/tmp`` are counted during a call (one ``fstatvfs``
each): code creating files flat out makes some ten thousand past the limit before the kill, a few MB of the
host's memory."""
_KILLED_BY: dict[int, Limit] = {
    signal.SIGXCPU: Limit.CPU,
    signal.SIGKILL: Limit.KERNEL_CPU,
    signal.SIGSEGV: Limit.MEMORY,
    signal.SIGBUS: Limit.MEMORY,
    signal.SIGABRT: Limit.MEMORY,
    signal.SIGXFSZ: Limit.FILE_SIZE,
}
"""The limit behind each signal that kills a kernel (Python ignores ``SIGXFSZ``; a program it runs may not)."""


@dataclass(frozen=True)
class Execution:
    """What one call of the kernel gave.

    Attributes:
        stdout: What the code printed (cut at the output limit).
        stderr: What it wrote to standard error.
        result: The ``repr`` of its final expression, if it has one and it is not None.
        error: The exception the code raised (formatted), which leaves the kernel running.
        killed: Why the kernel was killed (a limit), which loses its state; None when it was not.
    """

    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    error: str | None = None
    killed: str | None = None


class KernelDied(Exception):
    """The kernel could not be started, or stopped without being killed at a limit."""


class _TooManyFiles(Exception):
    """The sandbox's own scratch space or ``/tmp`` holds more files than allowed."""

    def __init__(self, limit: Limit) -> None:
        super().__init__(limit)
        self.limit = limit


@dataclass(frozen=True)
class _Watched:
    """A tmpfs the sandbox mounted itself, reached through a descriptor: its file count is watched."""

    view: int
    max_files: int
    limit: Limit


class Kernel:
    """A long-lived interpreter in the sandbox, keeping one namespace across calls.

    Args:
        settings: The limits and confinement.
        scratch: The session's scratch directory (the kernel's ``/work``).
        uid: The uid it runs as (None: the server's own).

    Confined as the server's own uid, the kernel's ``/work`` and ``/tmp`` are
    tmpfs of the sandbox's own, which :attr:`files_root` (and a watch of
    ``/tmp``'s file count) reaches (see :mod:`.scratch`); otherwise ``/work`` is ``scratch``.
    """

    def __init__(self, settings: SandboxSettings, scratch: Path, uid: int | None) -> None:
        self._settings = settings
        self._scratch = scratch
        self.uid = uid
        self._process: asyncio.subprocess.Process | None = None
        self._own_scratch = settings.confinement == "bubblewrap" and uid is None
        self._watched: list[_Watched] = []

    @property
    def alive(self) -> bool:
        """Whether the process runs."""
        return self._process is not None and self._process.returncode is None

    @property
    def files_root(self) -> Path | int:
        """Where the server reads the kernel's ``/work``: the scratch directory, or a descriptor of the sandbox's own.

        The descriptor stays open after the kernel dies (the files of its last call can be read) until :meth:`close`.
        """
        return next((w.view for w in self._watched if w.limit is Limit.SCRATCH), self._scratch)

    async def start(self) -> None:
        """Start the process (and, where the sandbox mounts its own scratch space, reach it).

        Raises:
            KernelDied: it could not be executed, or its scratch space not reached.
        """
        if not self._own_scratch:
            await self._spawn(self._plan())
            return
        info_read, info_write = os.pipe()
        try:
            try:
                await self._spawn(self._plan(info_write))
            finally:
                os.close(info_write)
            async with asyncio.timeout(_START_SECONDS):
                info = await asyncio.to_thread(_read_all, info_read)
                # Once the kernel answers, bubblewrap's mounts are done: its /proc/<pid>/root is the sandbox's.
                ready = await self.execute("")
            if ready.killed:
                raise KernelDied(f"the kernel stopped as it started ({ready.killed})")
            pid = int(json.loads(info)["child-pid"])
            settings = self._settings
            for inside, size, max_files, limit in (
                (scratch.SCRATCH, scratch.quota_bytes(settings), settings.max_scratch_files, Limit.SCRATCH),
                (scratch.TMP, scratch.tmp_bytes(settings), settings.max_tmp_files, Limit.TMP),
            ):
                self._watched.append(_Watched(scratch.open_view(pid, inside, size), max_files, limit))
        except (TimeoutError, ValueError, KeyError, TypeError, scratch.ScratchUnavailable) as exc:
            self._close_views()
            await self.kill()
            raise KernelDied(f"the sandbox's scratch space could not be reached: {exc!r}") from exc
        finally:
            os.close(info_read)

    async def close(self) -> None:
        """Kill the kernel and let go of its scratch space (a sandbox's own goes with it)."""
        await self.kill()
        self._close_views()

    def _plan(self, info_fd: int | None = None) -> Launch:
        try:
            return launch(self._settings, self._scratch, self.uid, info_fd)
        except ConfinementUnavailable as exc:
            raise KernelDied(str(exc)) from exc

    def _close_views(self) -> None:
        for watched in self._watched:
            os.close(watched.view)
        self._watched = []

    async def _spawn(self, plan: Launch) -> None:
        try:
            self._process = await asyncio.create_subprocess_exec(
                *plan.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=plan.cwd,
                env=plan.env,
                pass_fds=plan.pass_fds,
                start_new_session=True,  # its own process group, killed whole at a limit
                limit=self._frame_limit(),
            )
        except OSError as exc:
            raise KernelDied(f"the sandbox could not start: {exc}") from exc
        finally:
            plan.close_owned()

    async def execute(self, code: str) -> Execution:
        """Run ``code`` in the kernel's namespace, within the wall-clock limit.

        Raises:
            KernelDied: the kernel stopped for a reason other than a limit (its stderr says why).
        """
        process = self._process
        if process is None or process.stdin is None or process.stdout is None:
            raise KernelDied("the kernel is not running")
        data = json.dumps({"code": code}).encode("utf-8")
        try:
            # Sending is timed too: code may stop the kernel reading its requests, and a large one fills the pipe.
            async with asyncio.timeout(self._settings.wall_seconds):
                process.stdin.write(_HEADER.pack(len(data)) + data)
                await process.stdin.drain()
                reply = await self._read_watched(process.stdout)
        except TimeoutError:
            await self.kill()
            return Execution(killed=killed(Limit.WALL, self._settings))
        except _TooManyFiles as exc:
            await self.kill()
            return Execution(killed=killed(exc.limit, self._settings))
        except (asyncio.IncompleteReadError, ConnectionError):
            return Execution(killed=await self._death())
        except (ValueError, UnicodeDecodeError) as exc:  # a garbled or oversized reply: the code wrote into the pipe
            await self.kill()
            raise KernelDied(f"the kernel's reply was unreadable ({exc})") from exc
        return Execution(
            stdout=str(reply.get("stdout") or ""),
            stderr=str(reply.get("stderr") or ""),
            result=_text_or_none(reply.get("result")),
            error=hint(_text_or_none(reply.get("error")), _text_or_none(reply.get("limit")), self._settings),
        )

    async def kill(self) -> None:
        """Kill the kernel and everything it started (the sandbox's pid namespace dies with it)."""
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        if process.stderr is not None:
            with contextlib.suppress(OSError):
                await process.stderr.read()

    async def _read_watched(self, stdout: asyncio.StreamReader) -> dict[str, Any]:
        """The reply, while the files in the sandbox's own tmpfs are counted (bubblewrap cannot bound them)."""
        if not self._watched:
            return await self._read_reply(stdout)
        reading = asyncio.ensure_future(self._read_reply(stdout))
        watching = asyncio.ensure_future(self._watch_files())
        try:
            await asyncio.wait((reading, watching), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reading, watching):
                task.cancel()
            await asyncio.gather(reading, watching, return_exceptions=True)
        if not reading.cancelled():
            reply = reading.result()
            if (over := self._over()) is None:  # a call quicker than the watch
                return reply
            raise _TooManyFiles(over)
        raise _TooManyFiles(watching.result())  # or an error of the count itself

    async def _watch_files(self) -> Limit:
        """Return once a tmpfs of the sandbox's own holds more files than allowed: which limit that is."""
        while True:  # polled: nothing announces a new file
            if (over := self._over()) is not None:
                return over
            await asyncio.sleep(_WATCH_SECONDS)

    def _over(self) -> Limit | None:
        return next((w.limit for w in self._watched if scratch.files_in(w.view) > w.max_files), None)

    async def _read_reply(self, stdout: asyncio.StreamReader) -> dict[str, Any]:
        (length,) = _HEADER.unpack(await stdout.readexactly(_HEADER.size))
        if length > self._frame_limit():
            raise ValueError(f"a reply of {length} bytes")
        reply = json.loads((await stdout.readexactly(length)).decode("utf-8"))
        if not isinstance(reply, dict):
            raise ValueError("a reply that is not an object")
        return reply

    async def _death(self) -> str:
        """Why the kernel stopped, once it has: a limit it hit, or KernelDied."""
        process = self._process
        if process is None:
            raise KernelDied("the kernel is not running")
        try:
            status = await asyncio.wait_for(process.wait(), _EXIT_WAIT_SECONDS)
        except TimeoutError:
            await self.kill()
            status = process.returncode or -signal.SIGKILL
        # bwrap reports a child killed by signal N as 128 + N; unconfined, the status is -N.
        signum = -status if status < 0 else status - 128 if status > 128 else 0
        if (reached := _KILLED_BY.get(signum)) is not None:
            return killed(reached, self._settings)
        tail = b""
        if process.stderr is not None:
            with contextlib.suppress(OSError):
                tail = await process.stderr.read()
        detail = tail.decode("utf-8", "replace").strip()[-_STDERR_TAIL:]
        raise KernelDied(f"the kernel stopped (exit status {status})" + (f": {detail}" if detail else ""))

    def _frame_limit(self) -> int:
        # Four fields of output_chars characters, each up to 4 bytes of UTF-8 and JSON escaping's 6.
        return 4 * 6 * self._settings.output_chars + 4096


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _read_all(fd: int) -> bytes:
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    return data
