"""The serving process's heap, settled once it has started.

A server's start leaves a large heap of objects that live as long as the
process (modules, classes, the models' and libraries' tables). Python's cyclic
collector would scan all of them again at every full collection, for as long
as the process runs; per turn, that cost grows with whatever else the turn
allocates (traces measured it best: half of what a traced turn cost more than
an untraced one was the collector's). Freezing what exists after the start takes
it out of every later collection.
"""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Collect what the start left as garbage, then exempt everything still alive from later collections.

    Call it once, in a process that serves (``ferryman serve`` and each of its workers), after the start:
    what is frozen is never collected, so in a process that builds many apps (tests) it would only hold memory.
    """
    gc.collect()
    gc.freeze()
