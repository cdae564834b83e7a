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

from .confinement import launch
from .settings import SandboxSettings

_HEADER = struct.Struct(">I")
_STDERR_TAIL = 2000
_EXIT_WAIT_SECONDS = 5.0


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


class Kernel:
    """A long-lived interpreter in the sandbox, keeping one namespace across calls.

    Args:
        settings: The limits and confinement.
        scratch: The session's scratch directory (the kernel's ``/work``).
        uid: The uid it runs as (None: the server's own).
    """

    def __init__(self, settings: SandboxSettings, scratch: Path, uid: int | None) -> None:
        self._settings = settings
        self._scratch = scratch
        self.uid = uid
        self._process: asyncio.subprocess.Process | None = None

    @property
    def alive(self) -> bool:
        """Whether the process runs."""
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        """Start the process.

        Raises:
            KernelDied: it could not be executed.
        """
        plan = launch(self._settings, self._scratch, self.uid)
        try:
            self._process = await asyncio.create_subprocess_exec(
                *plan.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=plan.cwd,
                env=plan.env,
                start_new_session=True,  # its own process group, killed whole at a limit
                limit=self._frame_limit(),
            )
        except OSError as exc:
            raise KernelDied(f"the sandbox could not start: {exc}") from exc

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
                reply = await self._read_reply(process.stdout)
        except TimeoutError:
            await self.kill()
            return Execution(killed=f"killed: time limit {self._settings.wall_seconds:g} s exceeded")
        except (asyncio.IncompleteReadError, ConnectionError):
            return Execution(killed=await self._death())
        except (ValueError, UnicodeDecodeError) as exc:  # a garbled or oversized reply: the code wrote into the pipe
            await self.kill()
            raise KernelDied(f"the kernel's reply was unreadable ({exc})") from exc
        return Execution(
            stdout=str(reply.get("stdout") or ""),
            stderr=str(reply.get("stderr") or ""),
            result=_text_or_none(reply.get("result")),
            error=_with_memory_hint(_text_or_none(reply.get("error")), self._settings.memory_mb),
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
        settings = self._settings
        if signum == signal.SIGXCPU:
            return f"killed: CPU time limit {settings.cpu_seconds} s exceeded"
        if signum == signal.SIGKILL:
            return f"killed: CPU or memory limit exceeded ({settings.cpu_seconds} s, {settings.memory_mb} MB)"
        if signum in (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT):
            return f"killed: memory limit {settings.memory_mb} MB exceeded"
        if signum == signal.SIGXFSZ:
            return f"killed: file size limit {settings.max_file_mb} MB exceeded"
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


def _with_memory_hint(error: str | None, memory_mb: int) -> str | None:
    if error is not None and error.rstrip().endswith("MemoryError"):
        return f"{error.rstrip()} (memory limit {memory_mb} MB)"
    return error
