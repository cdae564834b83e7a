"""Kernels per session: started on first use, kept between calls, removed with their session or when idle."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ferryman.ids import new_hex
from ferryman.sandbox_settings import SandboxSettings

from . import claims, files, scratch
from .confinement import ConfinementUnavailable, self_test
from .kernel import Execution, Kernel, KernelDied

log = logging.getLogger(__name__)

_UID_SLOTS = 256
"""Live kernels per server process; each process takes its own range of uids (by pid), so that
processes sharing a host (``--workers``, replicas, test workers) do not share process counts."""
_UID_RANGES = 4096
_MAX_REAP_INTERVAL = 60.0


class SandboxUnavailable(Exception):
    """Code cannot run here; the message says why."""


@dataclass(frozen=True)
class ProducedFile:
    """A file the code wrote (new or changed) in its scratch directory.

    Attributes:
        path: Its path relative to the scratch directory.
        data: Its bytes.
    """

    path: str
    data: bytes


@dataclass(frozen=True)
class RunOutcome:
    """One call: what the kernel gave, the files it wrote, and whether it had to start afresh.

    Attributes:
        execution: Output, result, error, or the limit that killed it.
        files: New or changed files (at most ``max_files_returned``, within ``max_file_mb`` together).
        restarted: The session had a kernel whose state was lost (killed at a limit, or idle too long).
    """

    execution: Execution
    files: list[ProducedFile] = field(default_factory=list)
    restarted: bool = False


@dataclass
class _Session:
    kernel: Kernel
    scratch: Path
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    claim: int | None = None
    """This process's hold on the scratch space (see :mod:`.claims`), from the kernel's first start."""


class Sandbox:
    """Confined Python kernels, one per session, with a scratch directory each.

    The self-test runs here, once: if the host cannot confine code, every run
    raises :class:`SandboxUnavailable` saying why (``confinement: off`` runs
    unconfined, and says so in the log once). Before it, the scratch spaces
    that no live server process holds (left by a crash) are unmounted and deleted.

    Args:
        settings: Confinement, limits and where scratch directories live.
    """

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self._root = settings.directory()
        self._sessions: dict[str, _Session] = {}
        self._lost: set[str] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._per_kernel_uid = settings.confinement == "bubblewrap" and os.geteuid() == 0
        self.unavailable: str | None = None
        swept = claims.sweep(self._root)
        if swept:
            log.info("removed %d sandbox scratch spaces left by a stopped server process", len(swept))
        if settings.confinement == "off":
            log.warning("sandbox.confinement is off: code interpreter runs are NOT confined (rlimits only)")
            return
        if not self._per_kernel_uid:
            log.warning("the server does not run as root: sandboxed code runs without a process-count limit")
        try:
            self_test(settings, self._uid_range() if self._per_kernel_uid else None)
        except ConfinementUnavailable as exc:
            self.unavailable = f"code cannot be run confined on this host: {exc}"
            log.warning("%s; the code interpreter refuses to run (sandbox.confinement: off runs unconfined)", exc)

    async def run(self, session_id: str | None, code: str) -> RunOutcome:
        """Run ``code`` in the session's kernel (None: in a kernel of its own, removed afterwards).

        Raises:
            SandboxUnavailable: the host cannot confine code, or the kernel could not start or answer.
        """
        if self.unavailable is not None:
            raise SandboxUnavailable(self.unavailable)
        key = _key(session_id) if session_id is not None else f"once-{new_hex()}"
        self._start_reaper()
        try:
            return await self._run(key, code)
        finally:
            if session_id is None:
                await self.remove(key)

    async def remove(self, session_id: str) -> None:
        """Stop a session's kernel and delete its scratch directory (nothing happens for an unknown session).

        The directory stays while another server process (a worker) holds the session's kernel too.
        """
        key = _key(session_id)
        self._lost.discard(key)
        session = self._sessions.pop(key, None)
        if session is not None:
            await self._close(session)
        await self._discard(key)

    async def reap_idle(self) -> None:
        """Remove the sessions unused for ``idle_seconds``, and the scratch spaces no server process holds."""
        idle = self.settings.idle_seconds
        now = time.monotonic()
        for key, session in list(self._sessions.items()):
            if now - session.last_used >= idle and not session.lock.locked():
                await self.remove(key)
        await asyncio.to_thread(claims.sweep, self._root)

    async def close(self) -> None:
        """Stop the reaper and every kernel, and remove their scratch spaces (memory, not to outlive the server)."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await self._close(session)
            await self._discard(session.scratch.name)

    async def _run(self, key: str, code: str) -> RunOutcome:
        session = self._sessions.get(key)
        if session is None:
            session = _Session(Kernel(self.settings, self._root / key, self._free_uid()), self._root / key)
            self._sessions[key] = session
        async with session.lock:
            try:
                restarted = key in self._lost
                if not session.kernel.alive:
                    await self._restart(session)
                before = await asyncio.to_thread(files.snapshot, session.kernel.files_root)
                try:
                    execution = await session.kernel.execute(code)
                except KernelDied as exc:
                    await session.kernel.kill()
                    self._lost.add(key)
                    raise SandboxUnavailable(str(exc)) from exc
                if execution.killed:
                    self._lost.add(key)
                else:
                    self._lost.discard(key)
                produced = await asyncio.to_thread(self._produced, session.kernel.files_root, before)
                session.last_used = time.monotonic()
            finally:
                if self._sessions.get(key) is not session:  # removed during the call (remove() does not wait)
                    await self._close(session)  # the kernel it started meanwhile, and its claim
                    await self._discard(key)
        return RunOutcome(execution, produced, restarted)

    async def _restart(self, session: _Session) -> None:
        uid = session.kernel.uid
        await session.kernel.close()
        if session.claim is None:  # before its directory is made: a sweep removing it is waited for
            session.claim = await asyncio.to_thread(claims.claim, self._root, session.scratch.name)
        await asyncio.to_thread(session.scratch.mkdir, parents=True, exist_ok=True)
        if uid is not None:
            try:
                await asyncio.to_thread(scratch.mount, session.scratch, self.settings, uid)
                await asyncio.to_thread(scratch.mount_tmp, session.scratch, self.settings, uid)
            except scratch.ScratchUnavailable as exc:  # its detail names the server's directories: logged only
                log.warning("a sandbox session's scratch space could not be bounded: %s", exc)
                raise SandboxUnavailable(
                    "the session's scratch space could not be bounded (see the server's log)"
                ) from exc
            await asyncio.to_thread(files.give_to, session.scratch, uid)
        session.kernel = Kernel(self.settings, session.scratch, uid)
        try:
            await session.kernel.start()
        except KernelDied as exc:
            raise SandboxUnavailable(str(exc)) from exc

    def _produced(self, root: files.Root, before: files.Snapshot) -> list[ProducedFile]:
        # One budget for all of a call's files: the server holds them in memory and stores them.
        budget = self.settings.max_file_mb * 1024 * 1024
        produced: list[ProducedFile] = []
        for path in files.changed(before, files.snapshot(root)):
            if len(produced) >= self.settings.max_files_returned:
                break
            data = files.read_file(root, path, budget)
            if data:
                produced.append(ProducedFile(path, data))
                budget -= len(data)
        return produced

    async def _close(self, session: _Session) -> None:
        await session.kernel.close()
        if session.claim is not None:
            claims.release(session.claim)
            session.claim = None

    async def _discard(self, key: str) -> None:
        try:
            await asyncio.to_thread(claims.discard_unclaimed, self._root, key)
        except (OSError, scratch.ScratchUnavailable) as exc:  # the next sweep tries again; the session is gone
            log.warning("a sandbox scratch space was not removed: %s", exc)

    def _free_uid(self) -> int | None:
        """A uid no live kernel of this process uses (None: kernels run as the server's user)."""
        if not self._per_kernel_uid:
            return None
        used = {session.kernel.uid for session in self._sessions.values()}
        base = self._uid_range()
        free = next((base + slot for slot in range(_UID_SLOTS) if base + slot not in used), None)
        if free is None:
            raise SandboxUnavailable(f"this server process already runs {_UID_SLOTS} code interpreter kernels")
        return free

    def _uid_range(self) -> int:
        return self.settings.uid_base + (os.getpid() % _UID_RANGES) * _UID_SLOTS

    def _start_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            # A fresh context: the reaper outlives the turn that started it, and must not log under its ids.
            self._reaper = asyncio.create_task(self._reap_forever(), context=contextvars.Context())

    async def _reap_forever(self) -> None:
        interval = min(self.settings.idle_seconds / 2, _MAX_REAP_INTERVAL)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reap_idle()
            except OSError:
                log.exception("removing idle sandbox sessions failed")


def _key(session_id: str) -> str:
    """A session id as a directory name (ids that are not plain are replaced by a digest)."""
    if claims.KEY.fullmatch(session_id):
        return session_id
    return "s-" + uuid.uuid5(uuid.NAMESPACE_URL, session_id).hex
