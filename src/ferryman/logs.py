"""Log output no value can forge: each record is one line, and URLs lose what may be a secret.

Values reach log messages from callers (ids, names, reasons, exception texts);
a newline in one would start a line that reads as a record of its own, and an
escape sequence would rewrite the operator's terminal. :class:`OneLineFormatter`
(what ``ferryman serve`` logs with, in every worker) writes every control
character of a record as its escape, and the lines of a traceback each behind
:data:`CONTINUATION`, so a line that starts otherwise is always a new record.
:class:`JsonFormatter` (``--log-format json``) writes each record as one JSON
object instead, its ``extra`` fields as values of their own.
:func:`escape` does the same to one value, for text built outside logging (and
for records that must stay one line under any formatter: the audit's).
:func:`redacted_url` is how a URL enters a message or an error.

Every record written while a request is served carries its id
(:data:`current_request_id`, set by the HTTP edge), and the fields bound by
:func:`log_fields` (a turn's ids): :class:`ContextFilter` adds them. Tasks
started meanwhile (a turn run in the background) inherit both.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CONTINUATION = "  | "
"""What begins each line of a record's traceback: never the start of a record."""
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "mcp")
"""Libraries whose INFO and DEBUG records name URLs, headers or session ids (an MCP server's URL
or a search provider's may carry a key); they log at WARNING or above, whatever the level."""
LogFormat = Literal["text", "json"]
"""How ``ferryman serve`` writes its records: one escaped text line, or one JSON object, each."""

current_request_id: ContextVar[str | None] = ContextVar("ferryman_request_id", default=None)
"""The id of the request being served (set by the HTTP edge); None outside a request."""
_fields: ContextVar[Mapping[str, str]] = ContextVar("ferryman_log_fields", default=MappingProxyType({}))

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


@contextmanager
def log_fields(**fields: str | None) -> Iterator[None]:
    """Add ``fields`` (those not None) to every record logged in the block and in the tasks it starts."""
    bound = {name: value for name, value in fields.items() if value is not None}
    token = _fields.set(MappingProxyType({**_fields.get(), **bound}))
    try:
        yield
    finally:
        _fields.reset(token)


class ContextFilter(logging.Filter):
    """Adds the request's id (``request_id``) and the :func:`log_fields` to each record that lacks them.

    ``context_fields`` names them (those with a value), for the text format to end its line with.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the context's fields to ``record`` (the values it has already win); keep every record."""
        request_id = getattr(record, "request_id", None)
        if request_id is None:
            request_id = record.request_id = current_request_id.get()
        fields = _fields.get()
        for name, value in fields.items():
            if not hasattr(record, name):
                setattr(record, name, value)
        record.context_fields = (*(("request_id",) if request_id is not None else ()), *fields)
        return True


def context_filter() -> ContextFilter:
    """The server's :class:`ContextFilter`, for :func:`logging.config.dictConfig`, which each process applies.

    Python's warnings go to logging from then on (logger ``py.warnings``): in the same format as
    every other record, rather than as text of their own on stderr.
    """
    logging.captureWarnings(True)
    return ContextFilter()


class OneLineFormatter(logging.Formatter):
    """A formatter whose records are one line each, control characters escaped; a traceback follows
    its record, each of its lines behind :data:`CONTINUATION`. The line ends with the fields
    :class:`ContextFilter` added (``[request_id=… turn_id=…]``), if it added any."""

    def format(self, record: logging.LogRecord) -> str:
        """The record's line, every value in it escaped, then its traceback and stack (if any), continued."""
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        context = " ".join(f"{name}={getattr(record, name)}" for name in getattr(record, "context_fields", ()))
        lines = [escape(self.formatMessage(record) + (f" [{context}]" if context else ""))]
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


_RECORD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
_NOT_WRITTEN = frozenset({"color_message", "context_fields"})
"""uvicorn's copy of its message with terminal colours, and the names :class:`ContextFilter` added."""
_SECRET_FIELD = re.compile(r"(?:^|_)(?:authorization|api_?key|password|secret|token|credentials?|cookie)(?:$|_)", re.I)
"""Names of ``extra`` fields a library may fill with a secret: their values are never written."""
REDACTED = "[redacted]"


class JsonFormatter(logging.Formatter):
    """A formatter whose records are one JSON object each, on one line.

    The object holds ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``; then each of the
    record's ``extra`` fields as a value of its own (a field named like a secret, such as ``authorization``
    or ``api_key``, as ``[redacted]``); then ``exception`` and ``stack``, as text, if it has them.
    Control characters are escaped as JSON escapes them, and so are those JSON would leave as they are
    (DEL, C1, the line separators and bidirectional overrides): no value moves the operator's terminal.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in record.__dict__.items():
            if name in _RECORD_ATTRIBUTES or name in _NOT_WRITTEN or name in data:
                continue
            data[name] = REDACTED if _SECRET_FIELD.search(name) and value is not None else value
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["exception"] = record.exc_text
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        text = json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":"))
        # Outside JSON's strings there is nothing but ASCII: these characters are within one.
        return _CONTROL.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def _formatter(log_format: LogFormat) -> dict[str, Any]:
    """A new formatter entry each time: :func:`logging.config.dictConfig` pops its keys."""
    if log_format == "json":
        return {"()": f"{__name__}.JsonFormatter"}
    return {"()": f"{__name__}.OneLineFormatter", "fmt": FORMAT}


def logging_config(level: str, log_format: LogFormat = "text") -> dict[str, Any]:
    """The :func:`logging.config.dictConfig` of a server process: records on stderr at ``level``,
    one line each, in ``log_format``.

    uvicorn applies it in each worker; its own loggers, and every library's, write through the same
    handler (in the same format, with the request's id: :class:`ContextFilter`).
    """
    level = level.upper()
    quiet = logging.getLevelName(max(logging.WARNING, logging.getLevelName(level)))
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": f"{__name__}.context_filter"}},
        "formatters": {"line": _formatter(log_format)},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "line",
                "filters": ["context"],
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            **{name: {"level": quiet} for name in QUIET_LOGGERS},
            **{name: {"handlers": [], "propagate": True} for name in ("uvicorn", "uvicorn.access")},
        },
    }


def configure_logging(level: str, log_format: LogFormat = "text") -> None:
    """Log at ``level`` in one-line records of ``log_format`` (unless handlers are installed already);
    the :data:`QUIET_LOGGERS` never below WARNING, so no secret in a URL reaches the log."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter() if log_format == "json" else OneLineFormatter(FORMAT))
        handler.addFilter(context_filter())
        root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
