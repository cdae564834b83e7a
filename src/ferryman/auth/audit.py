"""Structured audit records: creates, deletes, policy denials and authentication failures.

Each is one record on the ``ferryman.audit`` logger with ``extra`` fields
``event``, ``principal`` (its qualified name, ``key:NAME`` or ``sub:ID``),
``action``, ``resource``, ``request_id`` and, for failures, ``reason``; a log
handler can ship them as JSON. The fields hold the values as they are; the
message repeats them escaped (:func:`ferryman.logs.escape`), so the record is
one line under any formatter, whatever an id holds. Only ids are written,
never a credential or a record's content.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

from ferryman.logs import escape

from .principal import current_principal

log = logging.getLogger("ferryman.audit")

current_request_id: ContextVar[str | None] = ContextVar("ferryman_request_id", default=None)
"""The id of the request being served (set by the HTTP edge); None outside a request."""


def audit(event: str, action: str, resource: str, reason: str | None = None) -> None:
    """Log one audit record for the current principal and request.

    Args:
        event: What happened: ``create``, ``delete``, ``denied`` or ``authentication_failed``.
        action: The action asked for: ``create``, ``read``, ``update`` or ``delete`` (an HTTP method for
            an authentication failure).
        resource: The record, as ``type::id`` (the path for an authentication failure).
        reason: Why it failed (logged, never told to the caller); a failure is a warning.
    """
    principal = current_principal.get()
    fields = {
        "event": event,
        "principal": principal.qualified if principal is not None else None,
        "action": action,
        "resource": resource,
        "request_id": current_request_id.get(),
    }
    if reason is None:
        shown = (escape(value) for value in (event, action, resource, fields["principal"]))
        log.info("%s %s %s by %s", *shown, extra=fields)
    else:
        shown = (escape(value) for value in (event, action, resource, reason))
        log.warning("%s: %s %s: %s", *shown, extra=fields | {"reason": reason})
