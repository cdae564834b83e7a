"""Which server process uses a session's scratch space, so that what a crashed one left can be swept safely.

Server processes share the scratch root (``--workers``, replicas on one host),
and more than one may serve the same session. Each holds a shared ``flock`` on
``<root>/<key>.lock`` while it has that session's kernel; a sweep takes the
lock exclusively without waiting, and only then unmounts and deletes the
session's directories (see :func:`.scratch.discard`) and the lock file. A
process that dies, however, lets go of its locks: what it mounted goes at the
next sweep (at every start, and with the idle reaper), while what a live
process uses is left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
from pathlib import Path

from . import scratch

log = logging.getLogger(__name__)

LOCK_SUFFIX = ".lock"
KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""A session's key: the name of its scratch directory."""
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def lock_path(root: Path, key: str) -> Path:
    """The lock file of the session whose scratch directory is ``root / key``."""
    return root / (key + LOCK_SUFFIX)


def claim(root: Path, key: str) -> int:
    """Hold a session's scratch space for this process, waiting while a sweep removes it; the lock's descriptor.

    Close the descriptor (:func:`release`) to let go.
    """
    root.mkdir(parents=True, exist_ok=True)
    path = lock_path(root, key)
    while True:
        fd = os.open(path, _FLAGS, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if _still_named(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # a sweep deleted the file it locked: take the one there now


def release(fd: int) -> None:
    """Let go of a claim."""
    os.close(fd)


def discard_unclaimed(root: Path, key: str) -> bool:
    """Unmount and delete a session's scratch space unless a process holds it; whether it was.

    Raises:
        scratch.ScratchUnavailable: a mount could not be unmounted (the lock file stays, for the next sweep).
    """
    path = lock_path(root, key)
    try:
        fd = os.open(path, _FLAGS, 0o600)
    except FileNotFoundError:  # the root itself is gone
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not _still_named(fd, path):  # another sweep has just removed it
            return False
        scratch.discard(root / key)
        path.unlink()
        return True
    finally:
        os.close(fd)


def sweep(root: Path) -> list[str]:
    """Remove every session's scratch space under ``root`` that no process holds; the keys removed."""
    removed: list[str] = []
    for key in sorted(_keys(root)):
        try:
            if discard_unclaimed(root, key):
                removed.append(key)
        except (OSError, scratch.ScratchUnavailable) as exc:
            log.warning("a stale sandbox scratch space was not removed: %s", exc)
    return removed


def _keys(root: Path) -> set[str]:
    """The sessions with anything under ``root``: a scratch directory, a ``/tmp`` directory or a lock file."""
    keys: set[str] = set()
    with contextlib.suppress(FileNotFoundError), os.scandir(root) as entries:
        for entry in entries:
            name = entry.name
            for suffix in (LOCK_SUFFIX, scratch.TMP_SUFFIX):
                name = name.removesuffix(suffix)
            if KEY.fullmatch(name):
                keys.add(name)
    return keys


def _still_named(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (a sweep deletes a lock file while holding it)."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
