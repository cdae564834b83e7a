"""Structured audit records: creates, deletes, policy denials, authentication failures and quota refusals.

Each is one record on the ``ferryman.audit`` logger with ``extra`` fields
``event``, ``principal`` (its qualified name, ``key:NAME`` or ``sub:ID``),
``action``, ``resource``, ``outcome``, ``status``, ``request_id`` and, for
failures, ``reason``; a log handler can ship them as JSON. The fields hold the
values as they are; the message repeats them escaped (:func:`ferryman.logs.escape`),
so the record is one line under any formatter, whatever an id holds; what is
stored is escaped too. Only ids are written, never a credential or a record's
content.

Within an HTTP request the record is also kept as data: the HTTP layer makes an
:class:`AuditScope` current (:data:`current_audit`, per app, inherited by the
tasks a request starts), whose sink queues it for storage
(:class:`~ferryman.services.audit_trail.AuditTrail`) without a round trip on
the request's path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Protocol

from ferryman.logs import current_request_id, escape

from .policy import Action
from .principal import Principal, current_principal

log = logging.getLogger("ferryman.audit")

DENIED, ALLOWED = "denied", "allowed"
_METHOD_ACTIONS: dict[str, Action] = {"POST": "create", "PUT": "update", "PATCH": "update", "DELETE": "delete"}
_INTENDED = frozenset({"update", "delete"})
MAX_TEXT_CHARS = 1024
"""The longest text of a record (a resource, a path, a reason), escaped; longer ones end in ``…``."""


def http_action(method: str) -> Action:
    """The action an HTTP method asks for: ``read`` (GET, HEAD…), ``create`` (POST), ``update``, ``delete``."""
    return _METHOD_ACTIONS.get(method.upper(), "read")


@dataclass(frozen=True)
class AuditEntry:
    """One audit record as :func:`audit` hands it to a sink (texts as they are: the sink escapes what it stores).

    Attributes:
        at: When (seconds since the epoch).
        request_id: The request's id (None outside a request).
        principal: Who acted (None: unauthenticated); the stored record is owned by it.
        event: ``create``, ``delete``, ``denied``, ``authentication_failed`` or ``rate_limited``.
        action: The action asked for.
        resource: The record (``type::id``), or the path of a request refused before any record.
        outcome: ``allowed`` or ``denied``.
        status: The HTTP status of a denial (None for what was allowed).
        route: The route template of the request, when known.
        reason: Why it was refused, when the status does not say it all.
    """

    at: float
    request_id: str | None
    principal: Principal | None
    event: str
    action: Action
    resource: str
    outcome: str
    status: int | None = None
    route: str | None = None
    reason: str | None = None


class AuditSink(Protocol):
    """Where audit entries go as data; ``submit`` runs on the request's path, so it must not wait."""

    def submit(self, entry: AuditEntry) -> None:
        """Take one entry (queue it; never block)."""
        ...


def _no_route() -> str | None:
    return None


@dataclass(frozen=True)
class AuditScope:
    """What the HTTP layer tells :func:`audit` about the request being served.

    Attributes:
        sink: The app's sink.
        method: The request's HTTP method ("" outside a request).
        route: The request's route template, found only when a record needs it.
    """

    sink: AuditSink
    method: str = ""
    route: Callable[[], str | None] = _no_route


current_audit: ContextVar[AuditScope | None] = ContextVar("ferryman_audit", default=None)
"""The audit scope of the request being served (set per app by the HTTP layer); None: records are only logged."""


@contextmanager
def auditing(scope: AuditScope) -> Iterator[None]:
    """Make ``scope`` current in the block (and in the tasks started in it)."""
    token = current_audit.set(scope)
    try:
        yield
    finally:
        current_audit.reset(token)


def audit(event: str, action: Action, resource: str, reason: str | None = None, *, status: int | None = None) -> None:
    """Log one audit record for the current principal and request, and keep it as data within a request.

    Args:
        event: What happened: ``create``, ``delete``, ``denied``, ``authentication_failed`` or ``rate_limited``.
        action: The action asked for: ``create``, ``read``, ``update`` or ``delete``. A read refused while a
            request deletes or updates (the service reading the record first) is recorded as that request's
            action: the caller asked to delete, not to read.
        resource: The record, as ``type::id`` (the path for a refusal before any record is known).
        reason: Why it failed (logged, never told to the caller); a failure is a warning.
        status: The HTTP status a denial is answered with (401, 403, 404, 409, 429).
    """
    scope = current_audit.get()
    named = action
    if scope is not None and event == DENIED and named == "read" and http_action(scope.method) in _INTENDED:
        named = http_action(scope.method)
    entry = AuditEntry(
        at=time.time(),
        request_id=current_request_id.get(),
        principal=current_principal.get(),
        event=event,
        action=named,
        resource=resource,
        outcome=ALLOWED if event in ("create", "delete") else DENIED,
        status=status,
        reason=reason,
    )
    _log(entry)
    if scope is not None:
        route = scope.route()
        scope.sink.submit(entry if route is None else replace(entry, route=route))


def bounded_text(value: str) -> str:
    """``value`` escaped, and cut to :data:`MAX_TEXT_CHARS` (an index entry must stay small on every backend)."""
    shown = escape(value)
    return shown if len(shown) <= MAX_TEXT_CHARS else shown[: MAX_TEXT_CHARS - 1] + "…"


def _log(entry: AuditEntry) -> None:
    """The record's line: its message escaped, its fields as they are (a JSON formatter escapes them itself)."""
    principal = None if entry.principal is None else entry.principal.qualified
    fields = {
        "event": entry.event,
        "principal": principal,
        "action": entry.action,
        "resource": entry.resource,
        "outcome": entry.outcome,
        "status": entry.status,
        "request_id": entry.request_id,
    }
    if entry.reason is None:
        shown = (escape(value) for value in (entry.event, entry.action, entry.resource, principal))
        log.info("%s %s %s by %s", *shown, extra=fields)
    else:
        shown = (escape(value) for value in (entry.event, entry.action, entry.resource, entry.reason))
        log.warning("%s: %s %s: %s", *shown, extra=fields | {"reason": entry.reason})
