"""Handing memory that this process freed back to the system.

CPython returns its own small-object arenas when they empty, but larger blocks
come from the C allocator, and glibc keeps what was freed in each thread's
arena for reuse: after a large job (tens of megabytes read, decoded, tokenized
and chunked in worker threads) the process would keep that much resident for
good. ``malloc_trim`` releases the free pages of every arena.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    trim: Callable[[int], int] | None = getattr(ctypes.CDLL(name), "malloc_trim", None)
    return trim  # None where the C library is not glibc (musl, macOS): nothing to trim there


def release_freed_memory() -> bool:
    """Give the free pages of the C allocator's arenas back to the system (glibc; elsewhere nothing).

    Returns:
        Whether memory was released.
    """
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
