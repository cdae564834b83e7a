"""The child process of :mod:`.isolated`: one file's text, under the limits it was given.

``python -P -m ferryman.knowledge.extract_child KIND MEMORY_MB CPU_SECONDS`` sets its
limits (``RLIMIT_AS``, ``RLIMIT_CPU``, no core file) before reading anything, reads
the file's bytes on stdin and writes its text on stdout. It imports only what
the file's kind needs (no event loop, no server module), so that it starts in
tens of milliseconds.
"""

from __future__ import annotations

import json
import resource
import sys

from .extract import UnreadableFile, read_as

UNREADABLE = 3
"""Exit status of a file that cannot be read; stdout holds ``{"code", "message"}`` of its :class:`UnreadableFile`."""
OUT_OF_MEMORY = 4
"""Exit status of a parse that reached the memory limit."""
ENCODING = ("utf-8", "surrogatepass")
"""How the text travels on stdout (a PDF's text may hold lone surrogates: carried, not refused)."""


def main(kind: str, memory_mb: int, cpu_seconds: int) -> int:
    """Limit this process, then write the text of the file on stdin; the exit status."""
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))  # SIGXCPU at the first, not SIGKILL
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        text = read_as(kind, sys.stdin.buffer.read()).encode(*ENCODING)
    except UnreadableFile as exc:
        sys.stdout.write(json.dumps({"code": exc.code, "message": exc.message}))
        return UNREADABLE
    except MemoryError:
        return OUT_OF_MEMORY
    sys.stdout.buffer.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
