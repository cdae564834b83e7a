"""What every command that talks to a running server shares: its flags, its client, its output, its errors.

A command is a function ``(client, args, out) -> int``. :func:`run` builds the
client from ``--url`` / ``--api-key`` (or ``FERRYMAN_URL`` / ``FERRYMAN_API_KEY``),
calls it, and turns the client's errors into one line on stderr and an exit
code: 1 for an answer from the server (a 404, a 400…), 2 when no answer came
(with why, when the server ``ferryman serve --detach`` started there has exited).
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ferryman.client import Client, RetryPolicy
from ferryman.client.errors import APIConnectionError, APIError

from . import pidfile
from .exits import EXIT_API_ERROR as EXIT_API_ERROR
from .exits import EXIT_USAGE

EXIT_UNREACHABLE = EXIT_USAGE
"""No answer: the server is down, unreachable or too slow."""

READ_TIMEOUT = 60.0
"""Seconds a command waits for each answer (a stream's next bytes included), unless it asks for longer."""
CONNECT_TIMEOUT = 10.0
"""Seconds to reach the server: a server that is down or unreachable is told at once, whatever the command."""

RETRY = RetryPolicy(connect_failures=False)
"""Answers worth waiting for (429, 503…) are asked again; a server that cannot be reached is told at once."""

_WIDE = 200
"""Columns when stdout is not a terminal: ids must never be cut or folded in what scripts read."""


class _Console(Console):
    """A rich console that leaves a closed stdout to ``ferryman``'s entry point, which ends quietly with 141.

    Rich's own handling exits 1, the status of an error from the server.
    """

    def on_broken_pipe(self) -> None:
        """Raise the error, for :func:`ferryman.cli.main.main` to end the command."""
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


class Output:
    """Where a command writes: a rich console for people, or one JSON document for ``--json``.

    Args:
        as_json: Whether the command was run with ``--json``.
    """

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        # Built now, not at import: tests (and callers) may have replaced sys.stdout since.
        self.console = _Console(file=sys.stdout, width=None if sys.stdout.isatty() else _WIDE, highlight=False)
        self.errors = _Console(file=sys.stderr, width=None if sys.stderr.isatty() else _WIDE, highlight=False)

    def document(self, value: Any) -> None:
        """Write ``value`` (models, dicts, lists of them) as the one JSON document on stdout."""
        print(json.dumps(jsonable(value), indent=2, ensure_ascii=False), file=sys.stdout, flush=True)

    def result(self, value: Any, text: str) -> None:
        """A command's outcome: ``value`` as the JSON document with ``--json``, else ``text`` for people."""
        if self.as_json:
            self.document(value)
        else:
            self.line(text)

    def table(self, columns: Iterable[str], rows: Iterable[Iterable[Any]], title: str | None = None) -> None:
        """Print a table for people."""
        table = Table(*columns, title=title, title_justify="left")
        for row in rows:
            table.add_row(*(_cell(value) for value in row))
        self.console.print(table)

    def fields(self, pairs: Iterable[tuple[str, Any]]) -> None:
        """Print ``name: value`` lines, names aligned."""
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        for name, value in pairs:
            table.add_row(name, _cell(value))
        self.console.print(table)

    def line(self, text: str) -> None:
        """Print one line for people, as it is (no markup)."""
        self.console.print(Text(text))

    def note(self, text: str) -> None:
        """A line for people on stderr (never mixed into a JSON document), as it is (no markup, never folded)."""
        self.errors.print(Text(text), soft_wrap=True)


Command = Callable[[Client, argparse.Namespace, Output], int]


def add_flags(parser: argparse.ArgumentParser, read_timeout: float = READ_TIMEOUT) -> None:
    """Add ``--url``, ``--api-key`` and ``--json`` to a command that talks to a server.

    Args:
        parser: The command's parser.
        read_timeout: Seconds the command's client waits for each answer (connecting stays short).
    """
    parser.add_argument("--url", help="server URL (default $FERRYMAN_URL, else http://127.0.0.1:8321)")
    parser.add_argument("--api-key", help="API key (default $FERRYMAN_API_KEY)")
    parser.add_argument("--json", action="store_true", help="print one JSON document (for scripts)")
    parser.set_defaults(read_timeout=read_timeout)


def client_for(args: argparse.Namespace) -> Client:
    """The client that ``--url`` and ``--api-key`` (or their environment variables) describe."""
    timeout = httpx.Timeout(args.read_timeout, connect=CONNECT_TIMEOUT)
    return Client(base_url=args.url, api_key=args.api_key, timeout=timeout, max_retries=RETRY)


def run(command: Command, args: argparse.Namespace) -> int:
    """Run ``command`` against the server; client errors become one line on stderr and an exit code."""
    out = Output(args.json)
    client = client_for(args)
    try:
        with client:
            return command(client, args, out)
    except APIConnectionError as exc:
        print(
            f"error: cannot reach {client.base_url}: {exc.message}{exited_server(str(client.base_url))}",
            file=sys.stderr,
        )
        return EXIT_UNREACHABLE
    except APIError as exc:
        print(f"error: {error_line(exc)}", file=sys.stderr)
        return EXIT_API_ERROR
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_API_ERROR


def exited_server(url: str) -> str:
    """Why nothing answers at ``url`` when it is the address of a server ``serve --detach`` started that exited."""
    detached = pidfile.read()
    if detached is None or not detached.serves(url) or detached.state() == "running":
        return ""
    return f" (the server 'ferryman serve --detach' started there, pid {detached.pid}, has exited: see {detached.log})"


class UsageError(Exception):
    """What the user asked cannot be done, found before or without asking the server (a missing file…)."""


def error_line(exc: APIError) -> str:
    """``code: message`` of an error the server answered (the message alone if it gave no code)."""
    message = " ".join(str(exc.message).split())  # one line, whatever the server put in it
    field = f" (field {exc.field})" if getattr(exc, "field", None) else ""
    return f"{exc.code}: {message}{field}" if exc.code else f"{message}{field}"


def jsonable(value: Any) -> Any:
    """``value`` with pydantic models (at any depth) turned into JSON-ready data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def when(value: datetime | int | float | None) -> str:
    """A time for people: ISO-8601 to the second, in UTC (Unix seconds accepted)."""
    if value is None:
        return ""
    moment = datetime.fromtimestamp(value, UTC) if isinstance(value, int | float) else value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _cell(value: Any) -> Text:
    """A table cell: text as it is, never read as rich markup (a tool's output may hold ``[...]``)."""
    if isinstance(value, Text):
        return value
    if value is None:
        return Text("")
    if isinstance(value, datetime):
        return Text(when(value))
    if isinstance(value, BaseModel | Mapping | list):
        return Text(json.dumps(jsonable(value), ensure_ascii=False))
    return Text(str(value))
