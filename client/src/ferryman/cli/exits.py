"""The ``ferryman`` command's exit statuses, and how it ends on Ctrl-C or a closed stdout.

Standard library only: every command (those of the client as well as ``serve``) uses it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

EXIT_OK = 0
"""The command did what was asked."""
EXIT_API_ERROR = 1
"""The server answered with an error, a turn failed, or what was asked cannot be done (an ambiguous id…)."""
EXIT_USAGE = 2
"""A bad argument or configuration (nothing was done), or no answer: the server is down, unreachable or too slow."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C), as a shell reports a command ended by SIGINT."""
EXIT_CLOSED_PIPE = 141
"""Stdout was closed before everything was written (piped into ``head``), as a shell reports SIGPIPE."""

EPILOG = f"""\
exit status:
  {EXIT_OK}    done
  {EXIT_API_ERROR}    the server answered with an error (error: CODE: MESSAGE on stderr), a turn or an
       ingestion failed, or what was asked cannot be done (an ambiguous id prefix, a file
       that does not exist, a server that would not start or stop)
  {EXIT_USAGE}    a bad argument or configuration (one line on stderr; nothing was started or
       changed), or no answer from the server (down, unreachable or too slow)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
  {EXIT_CLOSED_PIPE}  stdout was closed early (e.g. piped into head): the rest of the output is dropped

Ids (agents, sessions, turns, files, vector stores) may be given by a unique prefix, such as
the short ids 'ferryman chat' prints. With --json, stdout holds one JSON document and nothing
else; notes, progress bars and errors go to stderr.
"""


def closed_stdout() -> int:
    """End after stdout was closed by its reader: nothing more is written there, and no traceback.

    Stdout is pointed at the null device, so that what Python still holds in its buffer is
    dropped when it flushes at exit instead of failing once more ("Exception ignored…").
    """
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture): drop what follows
        sys.stdout = io.StringIO()
    else:
        null = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError):
            os.dup2(null, descriptor)
        os.close(null)
    return EXIT_CLOSED_PIPE
