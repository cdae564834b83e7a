"""Request parsing and response helpers shared by the routers."""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel, ValidationError
from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ferryman.api.limits import ENFORCED, has_control_character
from ferryman.errors import InvalidRequestError
from ferryman.inference.provider_data import HEADER as PROVIDER_DATA_HEADER
from ferryman.storage.base import StoredEvent

if TYPE_CHECKING:
    from .app import Services

M = TypeVar("M", bound=BaseModel)
_VALIDATOR_NAME = re.compile(r"function-\w+\[")


def services(request: Request) -> Services:
    """The services of the app serving ``request`` (``create_app`` puts them in the app's state)."""
    return cast("Services", request.app.state.services)


async def parse_body(request: Request, model: type[M]) -> M:
    """Validate the JSON body against ``model``, held to the request limits; a bad body is a 400 naming the field.

    The body itself is bounded while it arrives (``BodyLimitMiddleware``); the fields by
    :mod:`ferryman.api.limits`.
    """
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"{}", context=ENFORCED)
    except ValidationError as exc:
        raise _invalid(exc) from exc


def _invalid(exc: ValidationError) -> InvalidRequestError:
    errors = exc.errors(include_url=False)
    # In a union, the members of another type only say so ("Input should be a valid string"): name the one that
    # matched the value's type and failed (a string too long), if there is one.
    first = next((error for error in errors if not error["type"].endswith("_type")), errors[0])
    if first["type"] == "json_invalid":
        return InvalidRequestError(f"request body is not valid JSON: {first['msg']}")
    # A member of a plain union is named by its type and validators (``list[function-after[_check(), str]]``):
    # not a field of the request.
    field = ".".join(str(part) for part in first["loc"] if not _VALIDATOR_NAME.search(str(part)))
    count = exc.error_count()
    more = f" (and {count - 1} more error(s))" if count > 1 else ""
    return InvalidRequestError(f"invalid field '{field}': {first['msg']}{more}", field=field)


LARGEST_INT = 2**62
"""The largest integer a request may carry: every store keeps 64-bit integers, and a page reads one more row."""


def query_int(request: Request, name: str, default: int | None, minimum: int = 0) -> int | None:
    """An integer query parameter; a bad value is a 400."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidRequestError(f"query parameter '{name}' must be an integer", field=name) from exc
    if value < minimum:
        raise InvalidRequestError(f"query parameter '{name}' must be >= {minimum}", field=name)
    if value > LARGEST_INT:
        raise InvalidRequestError(f"query parameter '{name}' must be <= {LARGEST_INT}", field=name)
    return value


def query_order(request: Request, default: str = "desc") -> str:
    """The ``order`` query parameter of a list: ``asc`` or ``desc``."""
    order = request.query_params.get("order", default)
    if order not in ("asc", "desc"):
        raise InvalidRequestError("order must be 'asc' or 'desc'", "order")
    return order


def cursor_paging(request: Request, default_order: str = "desc", max_limit: int = 100) -> tuple[str | None, int, str]:
    """OpenAI's list parameters: the ``after`` cursor, ``limit`` (1..``max_limit``, 20 by default) and ``order``."""
    limit = query_int(request, "limit", 20, minimum=1) or 20
    if limit > max_limit:
        raise InvalidRequestError(f"limit must be at most {max_limit}", "limit")
    return request.query_params.get("after") or None, limit, query_order(request, default_order)


LATEST_SECONDS = 253_402_300_799
"""The last second of year 9999: the latest instant a query parameter may name."""


def query_instant(request: Request, name: str) -> float | None:
    """A query parameter naming an instant: ISO 8601 (UTC unless it says otherwise) or seconds since the epoch.

    Raises:
        InvalidRequestError: it is neither, or lies before 1970 or after 9999.
    """
    raw = (request.query_params.get(name) or "").strip()
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = _iso_seconds(raw, name)
    if not math.isfinite(seconds) or not 0 <= seconds <= LATEST_SECONDS:
        raise InvalidRequestError(f"query parameter '{name}' must lie between 1970 and 9999", name)
    return seconds


def _iso_seconds(raw: str, name: str) -> float:
    try:
        instant = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise InvalidRequestError(
            f"query parameter '{name}' must be an ISO 8601 date or time, or seconds since the epoch", name
        ) from exc
    return (instant if instant.tzinfo is not None else instant.replace(tzinfo=UTC)).timestamp()


def query_list(request: Request, name: str) -> list[str] | None:
    """A list query parameter, repeated (``a=1&a=2``) or comma-separated (``a=1,2``)."""
    values = request.query_params.getlist(name) + request.query_params.getlist(f"{name}[]")
    if not values:
        return None
    return [item for value in values for item in value.split(",") if item]


def provider_data(request: Request) -> dict[str, Any] | None:
    """The per-request provider settings of the ``X-LlamaStack-Provider-Data`` header.

    Its values (API keys) are never logged, stored or echoed: the error below
    names the header, not its content.
    """
    raw = request.headers.get(PROVIDER_DATA_HEADER)
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise InvalidRequestError(f"header {PROVIDER_DATA_HEADER} must be a JSON object", PROVIDER_DATA_HEADER)
    # Its keys and tokens are sent on as header values (``Authorization: Bearer …``): a line break there would
    # write a header of the caller's into the request to the model server, and a header holds ASCII only.
    for name, value in data.items():
        if name.endswith(("_key", "_token")) and isinstance(value, str) and not _header_safe(value):
            raise InvalidRequestError(
                f"header {PROVIDER_DATA_HEADER} holds a key or token that is not printable ASCII", PROVIDER_DATA_HEADER
            )
    return data


def _header_safe(value: str) -> bool:
    """Whether ``value`` can be sent as a header's value: printable ASCII (spaces allowed)."""
    return value.isascii() and not has_control_character(value)


def last_event_id(request: Request) -> int | None:
    """The ``Last-Event-ID`` header of a client resuming an SSE stream, if it sent one."""
    raw = request.headers.get("last-event-id", "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidRequestError("the Last-Event-ID header must be an event number", "Last-Event-ID") from exc
    if abs(value) > LARGEST_INT:
        raise InvalidRequestError(f"the Last-Event-ID header must be within ±{LARGEST_INT}", "Last-Event-ID")
    return value


def query_bool(request: Request, name: str) -> bool:
    """A boolean query parameter (``true``/``1``)."""
    return request.query_params.get(name, "").lower() in ("1", "true", "yes")


class JSONModelResponse(Response):
    """A response whose body is a pydantic model (or plain data) as JSON."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        """Serialise with pydantic for models, json for the rest."""
        if isinstance(content, BaseModel):
            return content.model_dump_json().encode()
        return json.dumps(content, default=_default).encode()


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"cannot serialise {type(value).__name__}")


SSE_SEPARATOR = "\n"
"""Ends each SSE line (the specification allows ``\\r\\n`` too, which sse-starlette writes by default)."""


def sse_response(events: AsyncIterator[ServerSentEvent]) -> StreamingResponse:
    """A ``text/event-stream`` response (with ``X-Accel-Buffering: no``, so proxies pass each event on at once).

    sse-starlette encodes each event; Starlette's own streaming response sends them. Its
    ``EventSourceResponse`` runs a task group of pings and signal watchers per response, which cost
    about 0.3 ms per streamed turn here and do nothing for us (no pings; Starlette already stops
    the stream when the client goes).
    """
    return StreamingResponse(_encoded(events), media_type="text/event-stream", headers=_SSE_HEADERS)


_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def _encoded(events: AsyncIterator[ServerSentEvent]) -> AsyncIterator[bytes]:
    async for event in events:
        yield event.encode()


def event_stream(events: AsyncIterator[StoredEvent], named: bool = False) -> StreamingResponse:
    """A stream of numbered events: ``id:`` each one's number, ``data:`` its JSON.

    Args:
        events: The events.
        named: Each event's ``type`` (in its JSON) is also its SSE ``event:`` (the Responses API).
    """
    return sse_response(_numbered(events, named))


async def _numbered(events: AsyncIterator[StoredEvent], named: bool) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        name = json.loads(event.data)["type"] if named else None
        yield ServerSentEvent(event.data, id=str(event.seq), event=name, sep=SSE_SEPARATOR)
