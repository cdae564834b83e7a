"""``ferryman serve --detach`` and ``ferryman stop``: a server in the background, known by its pidfile.

``serve --detach`` starts ``ferryman serve`` (the same flags) as a process of its own session,
its output appended to ``$FERRYMAN_HOME/server.log``, records it in
``$FERRYMAN_HOME/server.pid``, and returns once ``/v1/health`` answers, printing the URL
and the pid; if the process exits first, the last line it wrote (its one-line reason) is
printed and its exit status returned. ``stop`` sends that process SIGTERM, once its start
time and command line prove it is still the server, and waits for it to end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import pidfile
from .arguments import positive
from .exits import EXIT_API_ERROR, EXIT_OK, EXIT_USAGE

START_TIMEOUT = 120.0
"""Seconds ``serve --detach`` waits for the health check by default."""
STOP_TIMEOUT = 30.0
"""Seconds ``stop`` waits for the server to end by default (its graceful shutdown takes at most a few)."""
_POLL = 0.1
_EXCEPTION = re.compile(r"[A-Za-z_][\w.]*: \S")
"""The line of a traceback that names the exception (``sqlite3.DatabaseError: file is not a database``)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``ferryman stop`` to its parser."""
    parser.add_argument(
        "--timeout",
        type=positive,
        default=STOP_TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait for it to end (default {STOP_TIMEOUT:g})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document (for scripts)")
    parser.set_defaults(local=lambda args: stop(args.json, args.timeout))


def local_url(host: str, port: int) -> str:
    """The URL this machine reaches a server bound to ``host`` at (a wildcard address is reached on loopback)."""
    if host in ("", "0.0.0.0"):  # noqa: S104 - compared, not bound
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def start(serve_args: list[str], url: str, as_json: bool, timeout: float = START_TIMEOUT) -> int:
    """Start ``ferryman serve SERVE_ARGS`` in the background and wait until ``url`` answers its health check.

    Args:
        serve_args: The flags of the server process (no ``--detach``).
        url: Where the server will answer.
        as_json: Print the outcome as one JSON document.
        timeout: Seconds to wait for the health check.

    Returns:
        0 once it answers; if it ended first, 2 when it refused its arguments or configuration, else 1;
        1 if it still did not answer.
    """
    running = pidfile.read()
    if running is not None and running.state() == "running":
        _fail(
            f"a server started with 'ferryman serve --detach' is already running at {running.url} "
            f"(pid {running.pid}): stop it first with 'ferryman stop'"
        )
        return EXIT_USAGE
    log = pidfile.log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "ferryman.cli.main", "serve", *serve_args]
    with log.open("ab") as out:
        out.write(f"--- {datetime.now(UTC).isoformat(timespec='seconds')} ferryman serve --detach\n".encode())
        out.flush()
        offset = out.tell()
        child = subprocess.Popen(  # noqa: S603 - this very program, with the flags it was given
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C and the terminal's hang-up reach the shell's group, not the server
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    detached = pidfile.Detached(
        pid=child.pid,
        started=pidfile.start_time(child.pid) or "",
        command=pidfile.command_line(child.pid) or "",
        url=url,
        log=str(log),
    )
    pidfile.write(detached)
    try:
        status = _await_health(child, url, timeout)
    except BaseException:  # Ctrl-C while it starts: it does not outlive the command that started it
        child.terminate()
        pidfile.remove(detached)
        raise
    if status is None:
        document = {"url": url, "pid": child.pid, "log": str(log), "pidfile": str(pidfile.pidfile_path())}
        _print(
            as_json, document, f"ferryman serving at {url} (pid {child.pid}; log {log}); stop it with 'ferryman stop'"
        )
        return EXIT_OK
    if status == "timeout":
        _fail(
            f"the server (pid {child.pid}) did not answer {url}/v1/health within {timeout:g} s: it is still "
            f"starting or stuck (see {log}); 'ferryman stop' stops it"
        )
        return EXIT_API_ERROR
    pidfile.remove(detached)
    reason = _reason(log, offset) or f"it exited with status {status}"
    if reason.startswith("ferryman"):
        print(reason, file=sys.stderr)
    else:
        _fail(f"the server did not start: {reason} (see {log})")
    return EXIT_USAGE if status == EXIT_USAGE else EXIT_API_ERROR


def _await_health(child: subprocess.Popen[bytes], url: str, timeout: float) -> int | str | None:
    """None once ``url`` answers its health check; the child's exit status if it ends first; ``timeout``."""
    import httpx  # noqa: PLC0415 - only a detached start needs it

    deadline = time.monotonic() + timeout
    with httpx.Client(trust_env=False, timeout=2.0) as http:
        while True:
            status = child.poll()
            if status is not None:
                return status
            try:
                answered = http.get(f"{url}/v1/health").status_code == 200
            except httpx.HTTPError:
                answered = False
            if answered and child.poll() is None:
                return None
            if time.monotonic() >= deadline:
                return "timeout"
            time.sleep(_POLL)


def _reason(log: Path, offset: int) -> str:
    """Why the server the log (from ``offset``) is of ended: its one-line error, else the exception it died of.

    A line of ``ferryman: …`` (a refusal) is the reason; else the last exception a traceback names (a
    record of one line, its newlines escaped as ``\\n``); else the last line written.
    """
    try:
        with log.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    refusals = [line for line in lines if line.startswith("ferryman")]
    if refusals:
        return refusals[-1]
    for line in reversed(lines):
        if "Traceback (most recent call last)" in line:
            raised = [part for part in line.split("\\n") if _EXCEPTION.match(part)]
            if raised:
                return raised[-1]
    return lines[-1] if lines else ""


def stop(as_json: bool, timeout: float = STOP_TIMEOUT) -> int:
    """Stop the server the pidfile names, gracefully (SIGTERM), and remove the pidfile.

    Returns:
        0 once it ended (or when none was running); 1 if it did not end within ``timeout`` or may not be signalled.
    """
    path = pidfile.pidfile_path()
    detached = pidfile.read()
    if detached is None:
        _print(
            as_json,
            _stopped(None, False),
            f"no server started with 'ferryman serve --detach' is running ({path} absent)",
        )
        return EXIT_OK
    state = detached.state()
    if state != "running":
        pidfile.remove(detached)
        why = "has exited" if state == "exited" else f"has exited (pid {detached.pid} is another process now)"
        text = f"the server at {detached.url} (pid {detached.pid}) {why}: removed its pidfile {path}"
        _print(as_json, _stopped(detached, False), text)
        return EXIT_OK
    try:
        os.kill(detached.pid, signal.SIGTERM)
    except ProcessLookupError:
        pidfile.remove(detached)
        text = f"the server at {detached.url} (pid {detached.pid}) has exited: removed its pidfile {path}"
        _print(as_json, _stopped(detached, False), text)
        return EXIT_OK
    except PermissionError:
        _fail(f"not allowed to stop the server at {detached.url} (pid {detached.pid}): it is another user's")
        return EXIT_API_ERROR
    deadline = time.monotonic() + timeout
    while detached.state() == "running":
        if time.monotonic() >= deadline:
            _fail(
                f"the server at {detached.url} (pid {detached.pid}) is still running {timeout:g} s after SIGTERM "
                f"(see {detached.log}); 'kill -KILL {detached.pid}' ends it at once"
            )
            return EXIT_API_ERROR
        time.sleep(_POLL)
    pidfile.remove(detached)
    _print(as_json, _stopped(detached, True), f"stopped the server at {detached.url} (pid {detached.pid})")
    return EXIT_OK


def _stopped(detached: pidfile.Detached | None, stopped: bool) -> dict[str, Any]:
    """What ``stop --json`` prints: the server it found (if any) and whether this command stopped it."""
    pid, url = (detached.pid, detached.url) if detached is not None else (None, None)
    return {"stopped": stopped, "pid": pid, "url": url}


def _print(as_json: bool, document: dict[str, Any], text: str) -> None:
    print(json.dumps(document, indent=2) if as_json else text, flush=True)


def _fail(message: str) -> None:
    print(f"ferryman: {message}", file=sys.stderr)
