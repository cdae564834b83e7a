"""Structured audit records: creates, deletes, policy denials (and, from the HTTP edge, authentication failures).

Each is one record on the ``ferryman.audit`` logger with ``extra`` fields
``event``, ``principal``, ``action``, ``resource`` and ``request_id``; a log
handler can ship them as JSON. Only ids are written, never a credential or a
record's content.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

from .principal import current_principal

log = logging.getLogger("ferryman.audit")

current_request_id: ContextVar[str | None] = ContextVar("ferryman_request_id", default=None)
"""The id of the request being served (set by the HTTP edge); None outside a request."""


def audit(event: str, action: str, resource: str) -> None:
    """Log one audit record for the current principal and request.

    Args:
        event: What happened: ``create``, ``delete`` or ``denied``.
        action: The action asked for: ``create``, ``read``, ``update`` or ``delete``.
        resource: The record, as ``type::id``.
    """
    principal = current_principal.get()
    fields = {
        "event": event,
        "principal": principal.id if principal is not None else None,
        "action": action,
        "resource": resource,
        "request_id": current_request_id.get(),
    }
    log.info("%s %s %s by %s", event, action, resource, fields["principal"], extra=fields)
