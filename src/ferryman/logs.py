"""Log output no value can forge: each record is one line, and URLs lose what may be a secret.

Values reach log messages from callers (ids, names, reasons, exception texts);
a newline in one would start a line that reads as a record of its own, and an
escape sequence would rewrite the operator's terminal. :class:`OneLineFormatter`
(what ``ferryman serve`` logs with, in every worker) writes every control
character of a record as its escape, and the lines of a traceback each behind
:data:`CONTINUATION`, so a line that starts otherwise is always a new record.
:func:`escape` does the same to one value, for text built outside logging (and
for records that must stay one line under any formatter: the audit's).
:func:`redacted_url` is how a URL enters a message or an error.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CONTINUATION = "  | "
"""What begins each line of a record's traceback: never the start of a record."""
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "mcp")
"""Libraries whose INFO and DEBUG records name URLs, headers or session ids (an MCP server's URL
or a search provider's may carry a key); they log at WARNING or above, whatever the level."""

# C0 and C1 controls (newline, carriage return, ESC, NUL, NEL…), DEL, the Unicode line and
# paragraph separators, and the bidirectional overrides that reorder what a terminal shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(found: re.Match[str]) -> str:
    char = found.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def escape(value: object) -> str:
    """``str(value)`` with every control character written as its escape (``\\n``, ``\\x1b``, ``\\u2028``).

    Backslashes are left as they are, so escaping twice changes nothing.
    """
    return _CONTROL.sub(_escaped, str(value))


def redacted_url(url: str) -> str:
    """``url`` without user info, query or fragment (any of which may hold a secret).

    Without ``//`` (``user:pw@host/x``, ``http:user:pw@host``) there is no authority to drop the
    user info from: everything up to the last ``@`` goes, the scheme too (``user:`` is one there).
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "<invalid URL>"
    if not parts.netloc and "@" in parts.path:
        return escape(parts.path.rpartition("@")[2])
    return escape(urlunsplit((parts.scheme, netloc, parts.path, "", "")))


class OneLineFormatter(logging.Formatter):
    """A formatter whose records are one line each, control characters escaped; a traceback follows
    its record, each of its lines behind :data:`CONTINUATION`."""

    def format(self, record: logging.LogRecord) -> str:
        """The record's line, every value in it escaped, then its traceback and stack (if any), continued."""
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        lines = [escape(self.formatMessage(record))]
        # Not the record's cached exc_text: another handler may share the record, and ours is continued.
        if record.exc_info:
            lines.append(_continued(self.formatException(record.exc_info)))
        elif record.exc_text:
            lines.append(_continued(record.exc_text))
        if record.stack_info:
            lines.append(_continued(self.formatStack(record.stack_info)))
        return "\n".join(lines)


def _continued(text: str) -> str:
    return "\n".join(CONTINUATION + escape(line) for line in text.splitlines())


def logging_config(level: str) -> dict[str, Any]:
    """The :func:`logging.config.dictConfig` of a server process: one-line records on stderr at ``level``.

    uvicorn applies it in each worker; its own loggers write through the same handler.
    """
    level = level.upper()
    quiet = logging.getLevelName(max(logging.WARNING, logging.getLevelName(level)))
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"line": {"()": f"{__name__}.OneLineFormatter", "fmt": FORMAT}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "line", "stream": "ext://sys.stderr"}},
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            **{name: {"level": quiet} for name in QUIET_LOGGERS},
            **{name: {"handlers": [], "propagate": True} for name in ("uvicorn", "uvicorn.access")},
        },
    }


def configure_logging(level: str) -> None:
    """Log at ``level`` in one-line records (unless handlers are installed already); the
    :data:`QUIET_LOGGERS` never below WARNING, so no secret in a URL reaches the log."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(OneLineFormatter(FORMAT))
        root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
