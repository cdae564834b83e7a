"""BLAS held to its callers' threads, once for the whole process.

OpenBLAS splits a product over threads of its own, which spin waiting for each other: on cores busy with other
work (the event loop, other processes) a pass of the embedding model on every core ran five times slower than on
one, and a small matrix-vector product took 20 ms instead of 0.1. What multiplies in ferryman (the embedding
model's passes, the exact vector search) runs its products on threads of its own instead, so BLAS gets one thread,
the first time anything multiplies, and keeps it: a limit set and restored around each call races with the
others, a restore by one undoing the limit another relies on.
"""

from __future__ import annotations

import threading

_held = False
_holding = threading.Lock()


def hold_to_callers() -> None:
    """Limit the BLAS numpy loaded to one thread for the rest of the process (again: nothing to do)."""
    global _held
    if _held:
        return
    with _holding:
        if _held:
            return
        import numpy  # noqa: F401  (loads its BLAS, which the limit must find)
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

        threadpool_limits(limits=1, user_api="blas")
        _held = True
