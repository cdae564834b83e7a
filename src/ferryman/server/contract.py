"""The route tables: every endpoint with its typed contract, the one source of routes and OpenAPI document.

Each API module declares a tuple of :class:`Endpoint`; :func:`starlette_routes` turns one
into Starlette routes and :mod:`ferryman.server.openapi` into the document, so the two
cannot drift. Path parameters are the names in the path template (described in
:data:`PATH_PARAMS`); everything else an endpoint reads is named in its entry.

Every route checks its parameters before its handler runs (:func:`check_parameters`): no
path or query parameter holds a control character, and path parameters and the query
parameters typed :data:`~ferryman.api.limits.Id` are ids of at most 256 characters.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ferryman.api.limits import MAX_ID_CHARS, Id, has_control_character
from ferryman.errors import InvalidRequestError

from .http import LARGEST_INT
from .idempotent_routes import RecordAnswer, keyed

Handler = Callable[[Request], Awaitable[Response]]
MULTIPART = "multipart/form-data"


@dataclass(frozen=True)
class Param:
    """A query parameter or request header.

    Attributes:
        name: Its name on the wire.
        annotation: Its type, with constraints (``Annotated[int, Field(ge=1)]``); its JSON schema is documented.
        description: What it does.
        required: Whether a request must carry it.
        own: A parameter of ferryman's own on a route of an API it shares: marked ``x-ferryman-extension``.
    """

    name: str
    annotation: Any
    description: str
    required: bool = False
    own: bool = False


@dataclass(frozen=True)
class EventStream:
    """A ``text/event-stream`` answer.

    Attributes:
        data: The types one event's ``data:`` line holds as JSON (any of them); empty: any text.
        only: True when the endpoint always streams; False when it streams on request (``stream``).
    """

    data: tuple[Any, ...] = ()
    only: bool = False


@dataclass(frozen=True)
class Endpoint:
    """One route and its contract.

    Attributes:
        method: The HTTP method.
        path: The path under its mount, in Starlette's syntax (``{id}``, ``{id:path}``).
        handler: The module-level function that answers.
        summary: One line for the document.
        tag: The group it is listed under.
        body: The type (a pydantic model) the JSON body is validated with; None: no body.
        response: The type a 200 JSON answer is; None: an empty 200 (unless ``stream.only``).
        stream: The event stream it answers with, if any.
        query: Query parameters.
        headers: Request headers it reads.
        errors: Error statuses it can answer, each with the error body.
        creates: True for a POST that creates or runs something (it accepts ``Idempotency-Key``: see
            :mod:`ferryman.server.idempotent_routes`).
        key_with_run: With ``creates``: the handler takes the key itself (``take_key``), so that the run it
            starts, or the record it makes, claims the key in the same write that stores it (a record whose answer
            is known before it is written stores that answer with it: ``services.idempotency.answered``).
        replay_record: With ``creates``: the handler takes the key itself, so that the record it makes claims the
            key in the same write (:class:`~ferryman.services.idempotency.CreatedRecord`); a repeat is answered
            with this, given the record's id, as the first call was.
        example: An example body, for the document's readers (and the fuzzer's first cases).
        body_media_type: How the body is sent: JSON, or ``multipart/form-data`` (an upload; ``body`` documents it).
            A JSON body may hold ``server.max_body_bytes``, an upload ``files.max_bytes`` (413 above).
        status: The status of a successful answer (202: accepted, the work goes on in the background).
        own: A route of ferryman's own on an API it otherwise shares (OpenAI's, Llama Stack's), where that API has
            none: marked ``x-ferryman-extension`` in the document.
    """

    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    body: Any = None
    response: Any = None
    stream: EventStream | None = None
    query: tuple[Param, ...] = ()
    headers: tuple[Param, ...] = ()
    errors: tuple[int, ...] = (400, 404)
    creates: bool = False
    key_with_run: bool = False
    replay_record: RecordAnswer | None = None
    example: dict[str, Any] | None = None
    body_media_type: str = "application/json"
    status: int = 200
    own: bool = False

    def __post_init__(self) -> None:
        if (self.key_with_run or self.replay_record is not None) and not self.creates:
            raise TypeError(f"{self.method} {self.path}: only a create takes its Idempotency-Key itself")

    def is_upload(self) -> bool:
        """Whether the body is an upload (a multipart form), held to ``files.max_bytes`` rather than
        ``server.max_body_bytes`` (see :mod:`ferryman.server.body_limit`)."""
        return self.body_media_type == MULTIPART

    def path_params(self) -> list[str]:
        """The names of the path parameters, in order."""
        return [match.group(1) for match in _PATH_PARAM.finditer(self.path)]

    def openapi_path(self) -> str:
        """The path in OpenAPI's syntax: Starlette's converters (``:path``) dropped."""
        return _PATH_PARAM.sub(lambda match: "{" + match.group(1) + "}", self.path)


_PATH_PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")

PATH_PARAMS: dict[str, str] = {
    "agent_id": "The agent's id.",
    "session_id": "The session's id.",
    "turn_id": "The turn's id.",
    "step_id": "The step's id.",
    "model_id": "The model's identifier (it may contain slashes).",
    "toolgroup_id": "The toolgroup's identifier (it may contain slashes).",
    "shield_id": "The shield's identifier (it may contain slashes).",
    "tool_name": "The tool's name.",
    "response_id": "The response's id.",
    "conversation_id": "The conversation's id.",
    "item_id": "The item's id.",
    "file_id": "The file's id.",
    "vector_store_id": "The vector store's id.",
    "batch_id": "The file batch's id.",
    "vector_db_id": "The vector DB's id (the caller chose it when registering).",
    "schedule_id": "The schedule's id.",
    "label": "The memory block's label.",
    "approval_id": "The approval request's id.",
    "delivery_id": "The webhook delivery's id.",
}

PROVIDER_DATA = Param(
    "X-LlamaStack-Provider-Data",
    str,
    "A JSON object of per-request provider settings (such as an API key for the model server); never stored.",
)
LAST_EVENT_ID = Param(
    "Last-Event-ID",
    Annotated[int, Field(ge=-LARGEST_INT, le=LARGEST_INT)],
    "The number of the last event the client has: the stream continues after it.",
)
IDEMPOTENCY_KEY = Param(
    "Idempotency-Key",
    Annotated[str, Field(min_length=1, max_length=255)],
    "A key of the client's choosing: a repeat of the same request with the same key answers the first call's result.",
)

NonNegative = Annotated[int, Field(ge=0, le=LARGEST_INT)]
Positive = Annotated[int, Field(ge=1, le=LARGEST_INT)]


def starlette_routes(table: Sequence[Endpoint]) -> list[BaseRoute]:
    """The Starlette routes of a table, one per entry, each checking its parameters first."""
    return [Route(entry.path, _checked(entry), methods=[entry.method]) for entry in table]


def _checked(entry: Endpoint) -> Handler:
    ids = frozenset(param.name for param in entry.query if param.annotation == Id)
    taken = entry.key_with_run or entry.replay_record is not None
    handler = keyed(entry.handler, taken, entry.replay_record) if entry.creates else entry.handler

    @functools.wraps(handler)
    async def checked(request: Request) -> Response:
        check_parameters(request, ids)
        return await handler(request)

    return checked


def check_parameters(request: Request, id_query: Collection[str] = ()) -> None:
    """Refuse (400) a request whose path or query parameters are no ids a store can hold.

    Args:
        request: The request.
        id_query: The query parameters that are ids (bounded like path parameters).

    Raises:
        InvalidRequestError: a parameter holds a control character (C0 with NUL, DEL, C1), or a path
            parameter or id query parameter is longer than ``MAX_ID_CHARS``.
    """
    for name, value in request.path_params.items():
        _check(f"path parameter '{name}'", name, str(value), MAX_ID_CHARS)
    for name, value in request.query_params.multi_items():
        _check(f"query parameter '{name}'", name, value, MAX_ID_CHARS if name in id_query else None)


def _check(what: str, name: str, value: str, most: int | None) -> None:
    if has_control_character(value):
        raise InvalidRequestError(f"{what} must not contain control characters", name)
    if most is not None and len(value) > most:
        raise InvalidRequestError(f"{what} must be at most {most} characters long", name)
