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

A kernel's ``/tmp`` is bounded the same two ways (``max_file_mb``, ``max_tmp_files``):
run as root, the server mounts a tmpfs on ``<scratch>.tmp`` beside the scratch
directory, afresh for each kernel; unprivileged, bubblewrap mounts it and its file
count is watched.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from ferryman.sandbox_settings import SandboxSettings

from . import files

SCRATCH = "/work"
TMP = "/tmp"
TMP_SUFFIX = ".tmp"
_MB = 1024 * 1024
_MOUNT_SECONDS = 10.0
_MAX_STACKED = 8


class ScratchUnavailable(Exception):
    """A bounded scratch space could not be set up (mounted, or reached in the sandbox)."""


def quota_bytes(settings: SandboxSettings) -> int:
    """The bytes a session's scratch space holds."""
    return settings.max_scratch_mb * _MB


def tmp_bytes(settings: SandboxSettings) -> int:
    """The bytes a kernel's ``/tmp`` holds."""
    return settings.max_file_mb * _MB


def tmp_dir(path: Path) -> Path:
    """Where a root server mounts the ``/tmp`` of the kernel whose scratch directory is ``path``."""
    return path.with_name(path.name + TMP_SUFFIX)


def mount(path: Path, settings: SandboxSettings, uid: int) -> None:
    """Mount a bounded tmpfs on ``path`` (an existing directory), owned by ``uid``; nothing if one is there.

    Raises:
        ScratchUnavailable: ``mount`` failed (the server lacks ``CAP_SYS_ADMIN``).
    """
    if not os.path.ismount(path):
        _mount_tmpfs(path, quota_bytes(settings), settings.max_scratch_files, uid)


def mount_tmp(path: Path, settings: SandboxSettings, uid: int) -> None:
    """Mount a fresh bounded tmpfs on ``tmp_dir(path)`` for a new kernel (the last kernel's is unmounted).

    Raises:
        ScratchUnavailable: ``mount`` or ``umount`` failed.
    """
    folder = tmp_dir(path)
    unmount(folder)
    folder.mkdir(mode=0o700, exist_ok=True)
    _mount_tmpfs(folder, tmp_bytes(settings), settings.max_tmp_files, uid)


def unmount(path: Path) -> None:
    """Unmount what is mounted on ``path``, if anything (a race of two mounts may have stacked two)."""
    for _ in range(_MAX_STACKED):
        if not os.path.ismount(path):
            return
        # Lazily: its kernel is gone, but a reader of a file may still hold it; the memory goes with the last one.
        _util(["umount", "--lazy", str(path)])


def discard(path: Path) -> None:
    """Unmount a session's scratch space and its kernel's ``/tmp`` where mounted, then delete their directories."""
    for folder in (path, tmp_dir(path)):
        unmount(folder)
        files.remove(folder)


def open_view(sandbox_pid: int, inside: str, size: int) -> int:
    """A descriptor of a tmpfs a sandbox mounted itself at ``inside``, opened through its ``/proc/<pid>/root``.

    ``sandbox_pid`` is bubblewrap's process in the sandbox, once the kernel has answered (its mounts are done).

    Raises:
        ScratchUnavailable: that process is gone, or what was opened is not a file system of ``size`` bytes.
    """
    try:
        process = os.pidfd_open(sandbox_pid)
    except OSError as exc:
        raise ScratchUnavailable(f"the sandbox's process is gone ({exc})") from exc
    try:
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        view = os.open(f"/proc/{sandbox_pid}/root{inside}", flags)
        try:
            # The pid was the sandbox's when the descriptor was taken (alive now), and the directory is a
            # file system of exactly the quota's size: not a directory of another process that reused the pid.
            signal.pidfd_send_signal(process, 0)
            info = os.fstatvfs(view)
            if info.f_blocks * info.f_frsize != size:
                raise ScratchUnavailable(f"the sandbox's {inside} is not the bounded file system it mounted")
        except (OSError, ScratchUnavailable):
            os.close(view)
            raise
    except OSError as exc:
        raise ScratchUnavailable(f"the sandbox's {inside} could not be opened ({exc})") from exc
    finally:
        os.close(process)
    return view


def files_in(view: int) -> int:
    """How many files and directories the file system behind ``view`` holds (its root not counted)."""
    info = os.fstatvfs(view)
    return info.f_files - info.f_ffree - 1


def _mount_tmpfs(path: Path, size: int, max_files: int, uid: int) -> None:
    # The root directory takes an inode of its own: max_files is what the code may create.
    options = f"size={size},nr_inodes={max_files + 1},mode=0700,uid={uid},gid={uid},nosuid,nodev"
    _util(["mount", "-t", "tmpfs", "-o", options, "ferryman-scratch", str(path)])


def _util(argv: list[str]) -> None:
    env = {"PATH": os.environ.get("PATH") or os.defpath, "LANG": "C.UTF-8"}
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_MOUNT_SECONDS, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ScratchUnavailable(f"'{argv[0]}' failed: {exc}") from exc
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[-300:] or f"exit status {done.returncode}"
        raise ScratchUnavailable(f"'{argv[0]}' failed: {detail}")
