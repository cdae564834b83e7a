"""A session's scratch space, bounded in bytes and in files while the code writes, not only after it.

How depends on what the server may do:

- Run as root, the server mounts a tmpfs of ``max_scratch_mb`` and
  ``max_scratch_files`` inodes on each session's scratch directory (on the
  host): a write or a new file past the quota fails with ``ENOSPC`` in the
  code, the files outlive a kernel killed at a limit, and the server reads them
  where they are.
- Unprivileged, the server cannot mount: bubblewrap mounts a tmpfs of
  ``max_scratch_mb`` as the sandbox's ``/work`` (bytes still bounded by the
  host kernel, ``ENOSPC``), which the server reads through a descriptor it
  opens via ``/proc/<pid>/root`` when the kernel starts. bubblewrap cannot
  bound that tmpfs's inodes, so the file count is watched during each call
  (``fstatvfs``, cheap) and the kernel killed past it. The files go with the kernel.

Either way the quota is memory (pages actually written, swappable), never the host's disk.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from . import files
from .settings import SandboxSettings

SCRATCH = "/work"
_MB = 1024 * 1024
_MOUNT_SECONDS = 10.0


class ScratchUnavailable(Exception):
    """A bounded scratch space could not be set up (mounted, or reached in the sandbox)."""


def quota_bytes(settings: SandboxSettings) -> int:
    """The bytes a session's scratch space holds."""
    return settings.max_scratch_mb * _MB


def limit_message(settings: SandboxSettings) -> str:
    """The quota, as the model and the user read it."""
    return f"scratch space limit {settings.max_scratch_mb} MB, {settings.max_scratch_files} files"


def mount(path: Path, settings: SandboxSettings, uid: int) -> None:
    """Mount a bounded tmpfs on ``path`` (an existing directory), owned by ``uid``; nothing if one is there.

    Raises:
        ScratchUnavailable: ``mount`` failed (the server lacks ``CAP_SYS_ADMIN``).
    """
    if os.path.ismount(path):
        return
    # The root directory takes an inode of its own: max_scratch_files is what the code may create.
    options = (
        f"size={quota_bytes(settings)},nr_inodes={settings.max_scratch_files + 1},"
        f"mode=0700,uid={uid},gid={uid},nosuid,nodev"
    )
    _util(["mount", "-t", "tmpfs", "-o", options, "ferryman-scratch", str(path)])


def unmount(path: Path) -> None:
    """Unmount the scratch space mounted on ``path``, if one is."""
    if os.path.ismount(path):
        # Lazily: its kernel is gone, but a reader of a file may still hold it; the memory goes with the last one.
        _util(["umount", "--lazy", str(path)])


def discard(path: Path) -> None:
    """Unmount a session's scratch space if it is mounted, then delete its directory."""
    unmount(path)
    files.remove(path)


def open_view(sandbox_pid: int, settings: SandboxSettings) -> int:
    """A descriptor of the ``/work`` a sandbox mounted itself, opened through its ``/proc/<pid>/root``.

    ``sandbox_pid`` is bubblewrap's process in the sandbox, once the kernel has answered (its mounts are done).

    Raises:
        ScratchUnavailable: that process is gone, or what was opened is not its bounded ``/work``.
    """
    try:
        process = os.pidfd_open(sandbox_pid)
    except OSError as exc:
        raise ScratchUnavailable(f"the sandbox's process is gone ({exc})") from exc
    try:
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        view = os.open(f"/proc/{sandbox_pid}/root{SCRATCH}", flags)
        try:
            # The pid was the sandbox's when the descriptor was taken (alive now), and the directory is a
            # file system of exactly the quota's size: not a directory of another process that reused the pid.
            signal.pidfd_send_signal(process, 0)
            info = os.fstatvfs(view)
            if info.f_blocks * info.f_frsize != quota_bytes(settings):
                raise ScratchUnavailable(f"the sandbox's {SCRATCH} is not its bounded scratch space")
        except (OSError, ScratchUnavailable):
            os.close(view)
            raise
    except OSError as exc:
        raise ScratchUnavailable(f"the sandbox's {SCRATCH} could not be opened ({exc})") from exc
    finally:
        os.close(process)
    return view


def files_in(view: int) -> int:
    """How many files and directories the scratch space behind ``view`` holds (its root not counted)."""
    info = os.fstatvfs(view)
    return info.f_files - info.f_ffree - 1


def _util(argv: list[str]) -> None:
    env = {"PATH": os.environ.get("PATH") or os.defpath, "LANG": "C.UTF-8"}
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_MOUNT_SECONDS, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ScratchUnavailable(f"'{argv[0]}' failed: {exc}") from exc
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[-300:] or f"exit status {done.returncode}"
        raise ScratchUnavailable(f"'{argv[0]}' failed: {detail}")
