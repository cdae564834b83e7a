"""Ferryman's own exception classes.

Every layer raises these; only the HTTP layer knows which status code each
one becomes. Nothing here knows about HTTP.
"""

from __future__ import annotations


class FerrymanError(Exception):
    """Base class of every error ferryman raises on purpose."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFoundError(FerrymanError):
    """A named resource (agent, session, turn, step, model…) does not exist."""

    code = "not_found"


class InvalidRequestError(FerrymanError):
    """The request is well-formed JSON but asks for something invalid."""

    code = "invalid_request"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ConflictError(FerrymanError):
    """The request conflicts with the current state (busy session, wrong turn state)."""

    code = "conflict"


class UpstreamError(FerrymanError):
    """An inference provider or another upstream service failed."""

    code = "upstream_error"


class ConversationLockedError(ConflictError):
    """Another response is running on the same conversation."""

    code = "conversation_locked"


class TurnFailedError(FerrymanError):
    """A turn the client waited for ended in failure; the turn is stored as failed."""

    code = "turn_failed"


def error_for_code(code: str, message: str) -> FerrymanError:
    """Rebuild the exception a stored failure code stands for (a turn failure otherwise)."""
    for cls in (NotFoundError, InvalidRequestError, ConflictError, UpstreamError):
        if cls.code == code:
            return cls(message)
    return TurnFailedError(message)
