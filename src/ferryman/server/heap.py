"""The serving process's heap, settled once it has started.

A server's start leaves a large heap of objects that live as long as the
process (modules, classes, the models' and libraries' tables). Python's cyclic
collector would scan all of them again at every full collection, for as long
as the process runs; per turn, that cost grows with whatever else the turn
allocates (traces measured it best: half of what a traced turn cost more than
an untraced one was the collector's). Freezing what exists after the start takes
it out of every later collection.

The start also leaves pages that it freed in the C allocator's arenas (the migration's
and the app's assembly's temporaries, in the threads that ran them): they are handed
back to the system, which took about 1 MiB off an idle server's resident size.
"""

from __future__ import annotations

import gc

from ferryman.heap import release_freed_memory


def settle_heap() -> None:
    """Collect what the start left as garbage, exempt everything still alive from later collections, and give
    the pages freed back to the system (glibc; elsewhere nothing is given back).

    Call it once, in a process that serves (``ferryman serve`` and each of its workers), after the start:
    what is frozen is never collected, so in a process that builds many apps (tests) it would only hold memory.
    """
    gc.collect()
    gc.freeze()
    release_freed_memory()
