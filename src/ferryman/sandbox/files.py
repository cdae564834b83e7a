"""The files in a scratch directory, read without following anything the sandboxed code could plant.

The code may leave symlinks (to host paths) or special files in its scratch
directory, and processes it started may still be changing it; every read here
goes through directory descriptors with ``O_NOFOLLOW`` and checks the opened
file is a regular one, so nothing outside the directory is ever read. A root is
a directory's path, or a descriptor of one (a sandbox's own ``/work``, see :mod:`.scratch`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

Root = Path | int
"""A scratch directory's path, or an open descriptor of it."""

Snapshot = dict[str, tuple[int, int]]
"""Relative path -> (size, mtime in ns) of each regular file."""

_SKIP_DIRS = {"__pycache__"}


def snapshot(root: Root) -> Snapshot:
    """Every regular file under ``root`` (symlinks not followed, not listed)."""
    files: Snapshot = {}
    if isinstance(root, int):
        top, top_fd = ".", root
    elif root.is_dir():
        top, top_fd = str(root), None
    else:
        return files
    for folder, dirs, names, dir_fd in os.fwalk(top, follow_symlinks=False, dir_fd=top_fd):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        for name in names:
            with contextlib.suppress(OSError):
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    relative = os.path.relpath(os.path.join(folder, name), top)
                    files[relative] = (info.st_size, info.st_mtime_ns)
    return files


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    """The files new or changed between two snapshots, in path order."""
    return sorted(path for path, state in after.items() if before.get(path) != state)


def read_file(root: Root, relative: str, max_bytes: int) -> bytes | None:
    """A regular file's bytes, or None if it is gone, not regular, larger than ``max_bytes`` or reached by a link."""
    parts = Path(relative).parts
    if not parts or any(part in ("", ".", "..") for part in parts):
        return None
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        top, top_fd = (".", root) if isinstance(root, int) else (str(root), None)
        fd = os.open(top, flags | os.O_DIRECTORY, dir_fd=top_fd)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        file_fd = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
    except OSError:
        os.close(fd)
        return None
    os.close(fd)
    with os.fdopen(file_fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        return handle.read(max_bytes + 1)[:max_bytes]


def give_to(root: Path, uid: int) -> None:
    """Make ``root`` and everything in it owned by ``uid`` (links themselves, not their targets)."""
    os.chown(root, uid, uid, follow_symlinks=False)
    for _, dirs, names, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in [*dirs, *names]:
            with contextlib.suppress(OSError):
                os.chown(name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)


def remove(root: Path) -> None:
    """Delete a scratch directory (``rmtree`` does not follow links, and resists their races on Linux)."""
    shutil.rmtree(root, ignore_errors=True)
