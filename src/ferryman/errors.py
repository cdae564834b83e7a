"""Ferryman's own exception classes, and the one table of failure codes.

Every layer raises these. Each exception class stands for one
:class:`FailureCode` (the code a failed turn is stored with) and one HTTP
status; :data:`FAILURES` is the only place that pairs them. The statuses are
plain numbers here: only the HTTP layer answers with them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class FailureCode(StrEnum):
    """Why a request or a turn failed: the ``code`` of an error body and of a stored turn failure."""

    INVALID_REQUEST = "invalid_request"
    UNAUTHENTICATED = "unauthenticated"
    RATE_LIMITED = "rate_limited"
    FORBIDDEN = "forbidden"
    PROVIDER_KEY_REJECTED = "provider_key_rejected"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    CONVERSATION_LOCKED = "conversation_locked"
    CANCELLED = "cancelled"
    UPSTREAM_ERROR = "upstream_error"
    INTERRUPTED = "interrupted"
    INTERNAL_ERROR = "internal_error"
    TURN_FAILED = "turn_failed"
    CONFIGURATION_ERROR = "configuration_error"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    IDEMPOTENCY_KEY_IN_USE = "idempotency_key_in_use"


class FerrymanError(Exception):
    """Base class of every error ferryman raises on purpose.

    Attributes:
        code: What kind of failure this is.
        message: What went wrong, for a person; never holds a secret.
        fields: Structured details (``field`` names the request field at fault), sent in the error body.
    """

    code: ClassVar[FailureCode] = FailureCode.INTERNAL_ERROR

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = {key: value for key, value in fields.items() if value is not None}


class InvalidRequestError(FerrymanError):
    """The request is well-formed JSON but asks for something invalid."""

    code = FailureCode.INVALID_REQUEST

    def __init__(self, message: str, field: str | None = None, **fields: Any) -> None:
        super().__init__(message, field=field, **fields)
        self.field = field


class PayloadTooLargeError(InvalidRequestError):
    """The request's body (an upload) is larger than the server accepts."""

    code = FailureCode.PAYLOAD_TOO_LARGE


class ContextLengthExceededError(InvalidRequestError):
    """A prompt (with the room kept for the answer) is longer than the model's context.

    OpenAI's code for the same failure; a turn whose later inference would not fit fails with it too.
    """

    code = FailureCode.CONTEXT_LENGTH_EXCEEDED


class ProviderKeyRejectedError(InvalidRequestError):
    """A model server rejected the API key the client sent in its provider data (the client's key, its fault)."""

    code = FailureCode.PROVIDER_KEY_REJECTED


class AuthenticationError(FerrymanError):
    """The request carries no valid credential. Its message never says why (that is logged)."""

    code = FailureCode.UNAUTHENTICATED

    def __init__(self, message: str = "authentication required", **fields: Any) -> None:
        super().__init__(message, **fields)


class RateLimitedError(FerrymanError):
    """The caller used up a quota; ``retry_after`` says in how many seconds it may try again."""

    code = FailureCode.RATE_LIMITED

    def __init__(self, message: str, retry_after: int, **fields: Any) -> None:
        super().__init__(message, **fields)
        self.retry_after = retry_after


class ForbiddenError(FerrymanError):
    """The caller may see the record but the access policy forbids this action on it (or this create)."""

    code = FailureCode.FORBIDDEN


class NotFoundError(FerrymanError):
    """A named resource (agent, session, turn, step, model…) does not exist."""

    code = FailureCode.NOT_FOUND


class ConflictError(FerrymanError):
    """The request conflicts with the current state (busy session, wrong turn state)."""

    code = FailureCode.CONFLICT


class ConversationLockedError(ConflictError):
    """Another response is running on the same conversation."""

    code = FailureCode.CONVERSATION_LOCKED


class TurnCancelledError(ConflictError):
    """The turn was cancelled (by a client, a delete, or the server stopping) before it ended."""

    code = FailureCode.CANCELLED


class RunNotStartedError(ConflictError):
    """The run a reader waited for was stored but never launched: the request that started it failed."""


class IdempotencyKeyInUseError(ConflictError):
    """The first request with this ``Idempotency-Key`` still runs and has no outcome yet: retry later."""

    code = FailureCode.IDEMPOTENCY_KEY_IN_USE


class IdempotencyKeyReusedError(FerrymanError):
    """This ``Idempotency-Key`` was used with another request: a new request needs a new key."""

    code = FailureCode.IDEMPOTENCY_KEY_REUSED


class UpstreamError(FerrymanError):
    """An inference provider or another upstream service failed (or refused the server's own key)."""

    code = FailureCode.UPSTREAM_ERROR


class ToolsUnlistedError(UpstreamError):
    """A registered toolgroup's tools could not be listed: its MCP server is down, slow, failing or refused.

    A turn goes on without the group (and says so); a request that lists the group alone fails with it.

    Attributes:
        toolgroup_id: The toolgroup.
        reason: Why, without credentials (URLs without user info or query).
    """

    def __init__(self, toolgroup_id: str, reason: str) -> None:
        super().__init__(
            f"the tools of toolgroup '{toolgroup_id}' could not be listed: {reason}", toolgroup_id=toolgroup_id
        )
        self.toolgroup_id = toolgroup_id
        self.reason = reason


class TurnInterruptedError(FerrymanError):
    """The replica running the turn stopped before the turn ended."""

    code = FailureCode.INTERRUPTED


class InternalError(FerrymanError):
    """A bug or an unexpected condition inside ferryman."""

    code = FailureCode.INTERNAL_ERROR


class TurnFailedError(FerrymanError):
    """A turn the client waited for ended in a failure of a kind this version does not know."""

    code = FailureCode.TURN_FAILED


class ConfigurationError(FerrymanError):
    """The server's own configuration (file, flags, installed extras) cannot be used; never a client's fault."""

    code = FailureCode.CONFIGURATION_ERROR


class MissingExtraError(ConfigurationError):
    """An optional dependency that the configuration needs is not installed."""


FAILURES: dict[FailureCode, tuple[type[FerrymanError], int]] = {
    cls.code: (cls, status)
    for cls, status in (
        (InvalidRequestError, 400),
        (ProviderKeyRejectedError, 400),
        (PayloadTooLargeError, 413),
        (ContextLengthExceededError, 400),
        (AuthenticationError, 401),
        (RateLimitedError, 429),
        (ForbiddenError, 403),
        (NotFoundError, 404),
        (ConflictError, 409),
        (ConversationLockedError, 409),
        (TurnCancelledError, 409),  # someone stopped it on purpose: not a server fault
        (IdempotencyKeyInUseError, 409),
        (IdempotencyKeyReusedError, 422),
        (UpstreamError, 502),
        (TurnInterruptedError, 503),  # its replica went away; a new turn may well succeed
        (InternalError, 500),
        (TurnFailedError, 500),
        (ConfigurationError, 500),
    )
}
"""Failure code → (exception class, HTTP status): the one table both directions are read from."""


def error_for_code(code: str, message: str) -> FerrymanError:
    """Rebuild the exception a stored failure code stands for (a generic turn failure for an unknown code)."""
    try:
        cls, _ = FAILURES[FailureCode(code)]
    except ValueError:
        return TurnFailedError(message)
    return cls(message)
