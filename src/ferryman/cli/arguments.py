"""What the server's commands (``serve``, ``keys``…) take from the command line, checked before anything starts.

A bad value is one line on stderr and exit status 2, never a traceback, and
nothing is created for it: a ``--db`` in a folder that does not exist is
refused, not made (only ferryman's own home is created on demand).
"""

from __future__ import annotations

import argparse
import errno
import functools
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from ferryman.config import SHARED_DB_PREFIXES, Settings
from ferryman.errors import ConfigurationError, FerrymanError
from ferryman.logs import escape, redacted_url

from .exits import EXIT_USAGE

_SQLITE_URL = "sqlite:///"
_FAMILY_MISSING = (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT)
"""Errors of an address whose family this machine has not enabled (IPv6 switched off, say)."""


def guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``command`` with ferryman's errors (a bad argument or configuration) made one line on stderr and status 2."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except FerrymanError as exc:
            print(f"ferryman: {escape(exc.message)}", file=sys.stderr)
            return EXIT_USAGE

    return run


def port(text: str) -> int:
    """A TCP port to listen on, 1 to 65535."""
    value = _integer(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 1 to 65535 (got {text})")
    return value


def positive_int(text: str) -> int:
    """An integer of at least 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {text})")
    return value


def non_negative_int(text: str) -> int:
    """An integer of at least 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (got {text})")
    return value


def positive(text: str) -> float:
    """A number of more than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number (got {text!r})") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 (got {text})")
    return value


def http_url(text: str) -> str:
    """An ``http://`` or ``https://`` URL with a host (an inference server's)."""
    return _url(text, ("http", "https"))


def redis_url(text: str) -> str:
    """A ``redis://``, ``rediss://`` or ``unix://`` URL (what redis-py connects to)."""
    return _url(text, ("redis", "rediss", "unix"))


def _url(text: str, schemes: tuple[str, ...]) -> str:
    try:
        parts = urlsplit(text)
        valid = parts.scheme in schemes and bool(parts.hostname or parts.scheme in ("redis", "rediss", "unix"))
        parts.port  # noqa: B018  # raises ValueError on a port that is no number or out of range
    except ValueError:
        valid = False
    if not valid:
        shown = " or ".join(f"{scheme}://" for scheme in schemes)
        raise argparse.ArgumentTypeError(f"must be a URL starting {shown} (got {redacted_url(text)!r})")
    return text


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})") from None


def check_listen(host: str, port: int) -> None:
    """Refuse an address the server could not listen on (an unknown host, another's address, a port in use).

    uvicorn would find out only after the application started (its database created and migrated).
    Every address the host names is tried, as asyncio's server binds them; one of a family this
    machine has not enabled (``::1`` for ``localhost`` without IPv6) is skipped, as asyncio skips it.

    Raises:
        ConfigurationError: binding the address fails.
    """
    bound, unavailable = False, OSError(errno.EADDRNOTAVAIL, "no address to listen on")
    try:
        for family, _, _, _, address in socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            try:
                with socket.create_server(address, family=family):  # SO_REUSEADDR, as uvicorn binds
                    bound = True
            except OSError as exc:
                if exc.errno not in _FAMILY_MISSING:
                    raise
                unavailable = exc  # a family not enabled here: asyncio's server skips it too
        if not bound:
            raise unavailable
    except OSError as exc:
        raise ConfigurationError(f"cannot listen on {escape(host)} port {port}: {exc.strerror or exc}") from exc


def check_paths(settings: Settings) -> None:
    """Refuse paths the settings name whose folder does not exist (the default ones under the home excepted),
    and Redis URLs that redis-py could not parse (a port that is no number), from the config file too.

    Raises:
        ConfigurationError: the SQLite database or the files directory cannot be where it is asked to be,
            or a Redis URL is malformed.
    """
    db = settings.storage.db
    for flag, url in (("--db", db), ("--redis", settings.storage.redis)):
        if url and url.startswith(("redis://", "rediss://")):
            try:
                redis_url(url)
            except argparse.ArgumentTypeError as exc:
                raise ConfigurationError(f"{flag} {exc}") from None
    if db and not db.startswith(SHARED_DB_PREFIXES) and db.removeprefix(_SQLITE_URL) != ":memory:":
        path = Path(db.removeprefix(_SQLITE_URL))
        if path.is_dir():
            raise ConfigurationError(f"the database {escape(path)} is a directory; give a file in it (--db)")
        _check_folder(path.parent, f"the folder of the database {escape(path)}", "--db")
    if settings.files.dir:
        _check_folder(Path(settings.files.dir).parent, f"the folder of files.dir {escape(settings.files.dir)}", None)


def _check_folder(folder: Path, what: str, flag: str | None) -> None:
    if not folder.is_dir():
        state = "is not a directory" if folder.exists() else "does not exist"
        fix = f"create it, or give another {flag}" if flag else "create it, or set another"
        raise ConfigurationError(f"{what} {state}: {escape(folder)} ({fix})")
