"""Routes of the OpenAI Responses and Conversations APIs."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.limits import Id
from ferryman.api.response_events import ResponseStreamEvent
from ferryman.api.responses import (
    AddItemsRequest,
    CompactedResponse,
    CompactRequest,
    Conversation,
    ConversationList,
    CreateConversationRequest,
    CreateResponseRequest,
    DeletedObject,
    ForkConversationRequest,
    Item,
    ItemList,
    ResponseList,
    UpdateConversationRequest,
)
from ferryman.api.responses import Response as ResponseObject
from ferryman.services.responses.included import Listing, ended_answer, listed, shown_events, shown_response
from ferryman.storage.base import Page

from .contract import LAST_EVENT_ID, PROVIDER_DATA, Endpoint, EventStream, Param
from .http import (
    LARGEST_INT,
    JSONModelResponse,
    cursor_paging,
    event_stream,
    last_event_id,
    parse_body,
    provider_data,
    query_bool,
    query_int,
    query_list,
    services,
)
from .idempotent_routes import run_ended, take_key


def _include(request: Request) -> frozenset[str]:
    """OpenAI's ``include`` query parameter: what the reader asks to see of the items (``include[]`` too)."""
    return frozenset(query_list(request, "include") or ())


def _listed(kind: type[Listing], page: Page[Any]) -> Listing:
    """A page as OpenAI's list object."""
    return listed(kind, page.items, page.has_more)


def _item_list(page: Page[Item]) -> ItemList:
    return _listed(ItemList, page)


async def create_response(request: Request) -> Response:
    """Create a response: the result, its events as they happen (``stream``), or at once (``background``)."""
    body = await parse_body(request, CreateResponseRequest)
    # A stored response is read again by a repeat (its stream, or its end): its key is claimed by the write
    # that stores the response. One not stored, or answered before its run (background), claims its key first
    # and keeps its answer.
    run = body.store is not False and (bool(body.stream) or not body.background)
    key = await take_key(request, with_run=run)
    live = await services(request).responses.create(body, provider_data(request), replayed_by=key if run else None)
    if body.stream:
        return event_stream(shown_events(live.channel.read(), body.include), named=True)
    if body.background:
        return JSONModelResponse(shown_response(live.subject.encoder.response, body.include))
    assert live.task is not None
    result = await asyncio.shield(live.task)
    run_ended(request)
    return JSONModelResponse(ended_answer(result, body.include))


async def compact_response(request: Request) -> Response:
    """Summarize a conversation into a ``compaction`` item that later inputs give in its place."""
    body = await parse_body(request, CompactRequest)
    return JSONModelResponse(await services(request).responses.compact(body, provider_data(request)))


async def retrieve_response(request: Request) -> Response:
    """A response, or its events (``stream=true``) from the start or after a given event."""
    response_id = request.path_params["response_id"]
    responses = services(request).responses
    if query_bool(request, "stream"):
        # ``starting_after`` is OpenAI's; ``Last-Event-ID`` is what SSE clients send on their own.
        after = query_int(request, "starting_after", None, minimum=-1)
        if after is None:
            after = last_event_id(request)
        events = await responses.replay(response_id, -1 if after is None else after, _include(request))
        return event_stream(events, named=True)
    return JSONModelResponse(await responses.get(response_id, _include(request)))


async def delete_response(request: Request) -> Response:
    """Delete a stored response."""
    response_id = request.path_params["response_id"]
    await services(request).responses.delete(response_id)
    return JSONModelResponse(DeletedObject(id=response_id, object="response"))


async def cancel_response(request: Request) -> Response:
    """Cancel a background response."""
    return JSONModelResponse(await services(request).responses.cancel(request.path_params["response_id"]))


async def input_items(request: Request) -> Response:
    """One page of the items a response was given."""
    responses = services(request).responses
    page = await responses.input_items(
        request.path_params["response_id"], *cursor_paging(request, "desc"), _include(request)
    )
    return JSONModelResponse(_item_list(page))


async def list_responses(request: Request) -> Response:
    """One page of stored responses (of one conversation, with ``conversation_id``)."""
    conversation_id = request.query_params.get("conversation_id") or None
    page = await services(request).responses.list(*cursor_paging(request, "desc"), conversation_id)
    return JSONModelResponse(_listed(ResponseList, page))


async def create_conversation(request: Request) -> Response:
    """Create a conversation, with items if given (its request's key claimed by the write that stores it)."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, CreateConversationRequest)
    return JSONModelResponse(await services(request).conversations.create(body, key))


async def list_conversations(request: Request) -> Response:
    """One page of the conversations the caller may read (ferryman's own: OpenAI lists none)."""
    page = await services(request).conversations.listing(*cursor_paging(request, "desc"))
    return JSONModelResponse(_listed(ConversationList, page))


async def fork_conversation(request: Request) -> Response:
    """A new conversation whose items are the conversation's up to and including one (its request's key claimed
    by the write that stores it)."""
    key = await take_key(request)
    body = await parse_body(request, ForkConversationRequest)
    conversations = services(request).conversations
    fork = await conversations.fork(request.path_params["conversation_id"], body.item_id, body.metadata, key)
    return JSONModelResponse(fork)


async def get_conversation(request: Request) -> Response:
    """One conversation."""
    return JSONModelResponse(await services(request).conversations.get(request.path_params["conversation_id"]))


async def update_conversation(request: Request) -> Response:
    """Replace a conversation's metadata."""
    body = await parse_body(request, UpdateConversationRequest)
    conversations = services(request).conversations
    return JSONModelResponse(await conversations.update(request.path_params["conversation_id"], body.metadata))


async def delete_conversation(request: Request) -> Response:
    """Delete a conversation with its items."""
    conversation_id = request.path_params["conversation_id"]
    await services(request).conversations.delete(conversation_id)
    return JSONModelResponse(DeletedObject(id=conversation_id, object="conversation.deleted"))


async def add_items(request: Request) -> Response:
    """Append items to a conversation (its request's key claimed by the write that stores them)."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, AddItemsRequest)
    conversations = services(request).conversations
    conversation_id = request.path_params["conversation_id"]
    return JSONModelResponse(await conversations.add_items(conversation_id, list(body.items), _include(request), key))


async def list_items(request: Request) -> Response:
    """One page of a conversation's items."""
    conversations = services(request).conversations
    page = await conversations.list_items(
        request.path_params["conversation_id"], *cursor_paging(request, "desc"), _include(request)
    )
    return JSONModelResponse(_item_list(page))


async def get_item(request: Request) -> Response:
    """One item of a conversation."""
    p = request.path_params
    item = await services(request).conversations.get_item(p["conversation_id"], p["item_id"], _include(request))
    return JSONModelResponse(item)


async def delete_item(request: Request) -> Response:
    """Delete one item; the answer is the conversation."""
    p = request.path_params
    return JSONModelResponse(await services(request).conversations.delete_item(p["conversation_id"], p["item_id"]))


_PAGING = (
    Param("after", Id, "The id after which the page starts."),
    Param("limit", Annotated[int, Field(ge=1, le=100)], "Most items on the page (default 20)."),
    Param("order", Literal["asc", "desc"], "Oldest (asc) or newest (desc, the default) first."),
)
_OF_CONVERSATION = Param(
    "conversation_id", Id, "Only the responses made in this conversation (ferryman's own).", own=True
)
_INCLUDE = Param(
    "include", list[str], "What to show of the items (``file_search_call.results``), repeated or comma-separated."
)
_REPLAY = (
    _INCLUDE,
    Param("stream", bool, "Answer with the response's events instead of the object."),
    Param(
        "starting_after",
        Annotated[int, Field(ge=-1, le=LARGEST_INT)],
        "With stream: the number of the last event the client has.",
    ),
)
_EVENTS = EventStream(data=(ResponseStreamEvent,))
_RESPONSES, _CONVERSATIONS = "Responses", "Conversations"
_CONV = "/conversations/{conversation_id}"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("POST", "/responses", create_response, "Create a response", _RESPONSES, CreateResponseRequest,
             ResponseObject, stream=_EVENTS, headers=(PROVIDER_DATA,), errors=(400, 404, 409, 500, 502),
             creates=True, key_with_run=True, example={"model": "my-model", "input": "What is 2+2?", "stream": True}),
    Endpoint("POST", "/responses/compact", compact_response, "Compact a conversation", _RESPONSES, CompactRequest,
             CompactedResponse, headers=(PROVIDER_DATA,), errors=(400, 404, 409, 502),
             example={"model": "my-model", "previous_response_id": "resp_123"}),
    Endpoint("GET", "/responses", list_responses, "List responses", _RESPONSES, response=ResponseList,
             query=(*_PAGING, _OF_CONVERSATION)),
    Endpoint("GET", "/responses/{response_id}", retrieve_response, "Get a response, or replay its events",
             _RESPONSES, response=ResponseObject, stream=_EVENTS, query=_REPLAY, headers=(LAST_EVENT_ID,)),
    Endpoint("DELETE", "/responses/{response_id}", delete_response, "Delete a response", _RESPONSES,
             response=DeletedObject),
    Endpoint("POST", "/responses/{response_id}/cancel", cancel_response, "Cancel a background response",
             _RESPONSES, response=ResponseObject, errors=(400, 404, 409)),
    Endpoint("GET", "/responses/{response_id}/input_items", input_items, "List a response's input items",
             _RESPONSES, response=ItemList, query=(*_PAGING, _INCLUDE)),
    Endpoint("POST", "/conversations", create_conversation, "Create a conversation", _CONVERSATIONS,
             CreateConversationRequest, Conversation, errors=(400,), creates=True, key_with_run=True),
    Endpoint("GET", "/conversations", list_conversations, "List conversations", _CONVERSATIONS,
             response=ConversationList, query=_PAGING, own=True),
    Endpoint("GET", _CONV, get_conversation, "Get a conversation", _CONVERSATIONS, response=Conversation),
    Endpoint("POST", _CONV, update_conversation, "Update a conversation's metadata", _CONVERSATIONS,
             UpdateConversationRequest, Conversation),
    Endpoint("DELETE", _CONV, delete_conversation, "Delete a conversation", _CONVERSATIONS, response=DeletedObject),
    Endpoint("POST", f"{_CONV}/fork", fork_conversation, "Fork a conversation at an item", _CONVERSATIONS,
             ForkConversationRequest, Conversation, errors=(400, 404), creates=True, key_with_run=True),
    Endpoint("POST", f"{_CONV}/items", add_items, "Add items to a conversation", _CONVERSATIONS, AddItemsRequest,
             ItemList, creates=True, key_with_run=True, query=(_INCLUDE,)),
    Endpoint("GET", f"{_CONV}/items", list_items, "List a conversation's items", _CONVERSATIONS, response=ItemList,
             query=(*_PAGING, _INCLUDE)),
    Endpoint("GET", f"{_CONV}/items/{{item_id}}", get_item, "Get an item", _CONVERSATIONS,
             response=Item, query=(_INCLUDE,)),
    Endpoint("DELETE", f"{_CONV}/items/{{item_id}}", delete_item, "Delete an item", _CONVERSATIONS,
             response=Conversation),
)  # fmt: skip
"""The OpenAI Responses and Conversations APIs."""
