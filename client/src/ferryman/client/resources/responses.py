"""The Responses and Conversations APIs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, overload

import httpx

from ferryman.api.responses import (
    CompactedResponse,
    Conversation,
    ConversationList,
    DeletedObject,
    Item,
    ItemList,
    ListedResponse,
    Response,
    ResponseList,
)

from .._pagination import AsyncPage, SyncPage, by_cursor
from .._parsing import adapted, body, model
from .._streaming import AsyncStream, ResponseData, ResponseStreamKind, Stream
from .._transport import AsyncTransport, Call, RequestPlan, SyncTransport, path
from ._base import AsyncResource, SyncResource, route_call

_RESPONSE = "/v1/responses/{}"
_CONV = "/v1/conversations/{}"


def _create(model_id: str, input: Any, stream: bool, options: Mapping[str, Any]) -> RequestPlan:
    return RequestPlan("POST", "/v1/responses", json=body(model=model_id, input=input, stream=stream, **options),
                       idempotent=True, stream=stream)  # fmt: skip


def _compact(model_id: str, input: Any, previous_response_id: str | None,
             options: Mapping[str, Any]) -> Call[CompactedResponse]:  # fmt: skip
    fields = body(model=model_id, input=input, previous_response_id=previous_response_id, **options)
    return Call(RequestPlan("POST", "/v1/responses/compact", json=fields), model(CompactedResponse))


def _replay(response_id: str, starting_after: int | None) -> RequestPlan:
    params = {"stream": "true", "starting_after": starting_after}
    return RequestPlan("GET", path(_RESPONSE, response_id), params=params, stream=True)


def _paging(limit: int | None, order: str | None, after: str | None) -> dict[str, Any]:
    return {"limit": limit, "order": order, "after": after}


def _responses(limit: int | None, order: str | None, after: str | None, conversation_id: str | None) -> RequestPlan:
    return RequestPlan(
        "GET", "/v1/responses", params={**_paging(limit, order, after), "conversation_id": conversation_id}
    )


def _conversations(limit: int | None, order: str | None, after: str | None) -> RequestPlan:
    return RequestPlan("GET", "/v1/conversations", params=_paging(limit, order, after))


def _fork(conversation_id: str, item_id: str, metadata: Mapping[str, str] | None) -> Call[Conversation]:
    plan = RequestPlan("POST", path(_CONV + "/fork", conversation_id), json=body(item_id=item_id, metadata=metadata),
                       idempotent=True)  # fmt: skip
    return Call(plan, model(Conversation))


def _add_items(conversation_id: str, items: Sequence[Any]) -> Call[ItemList]:
    plan = RequestPlan("POST", path(_CONV + "/items", conversation_id), json=body(items=items), idempotent=True)
    return Call(plan, model(ItemList))


_ITEM: Callable[[httpx.Response], Item] = adapted(Item)


class Responses(SyncResource):
    """``client.responses``."""

    @overload
    def create(self, *, model: str, input: Any = "", stream: Literal[False] = False, **options: Any) -> Response: ...

    @overload
    def create(self, *, model: str, input: Any = "", stream: Literal[True], **options: Any) -> Stream[ResponseData]: ...

    def create(self, *, model: str, input: Any = "", stream: bool = False,
               **options: Any) -> Response | Stream[ResponseData]:  # fmt: skip
        """Create a response (``instructions``, ``tools``, ``conversation``, ``previous_response_id``, ``background``…).

        With ``stream=True`` its events, read on across dropped connections. In a ``conversation``,
        ``multitask_strategy`` (ferryman's own: ``reject``, the default, ``enqueue``, ``interrupt``, ``rollback``)
        says what the response does while another runs there. With ``webhook`` (ferryman's own, an ``http(s)``
        URL) the server posts a signed ``response.completed``, ``response.failed`` or ``response.cancelled``
        there when the response ends.
        """
        plan = _create(model, input, stream, options)
        if stream:
            return Stream(self._transport, plan, ResponseStreamKind())
        return self._transport.call(Call(plan, _response))

    def compact(self, *, model: str, input: Any = None, previous_response_id: str | None = None,
                **options: Any) -> CompactedResponse:  # fmt: skip
        """Summarize a conversation (its ``input`` items, after ``previous_response_id``'s chain) into one item.

        Args:
            model: The model that writes the summary (unless the server names ``context.summary_model``).
            input: The conversation's items (or a text), all or those after ``previous_response_id``.
            previous_response_id: A stored response whose chain comes first.
            **options: More fields of the request (``instructions``).

        Returns:
            The conversation's user messages, then a ``compaction`` item whose sealed ``encrypted_content``
            stands in for the rest when the whole ``output`` is given as a later response's ``input``.
        """
        return self._transport.call(_compact(model, input, previous_response_id, options))

    def retrieve(self, response_id: str) -> Response:
        """One response."""
        return self._transport.call(route_call("GET", _RESPONSE, Response, response_id))

    def stream(self, response_id: str, *, starting_after: int | None = None) -> Stream[ResponseData]:
        """A response's events from the start (or after event ``starting_after``), live while it runs."""
        return Stream(self._transport, _replay(response_id, starting_after), ResponseStreamKind(response_id))

    def cancel(self, response_id: str) -> Response:
        """Cancel a background response."""
        return self._transport.call(route_call("POST", _RESPONSE + "/cancel", Response, response_id))

    def delete(self, response_id: str) -> DeletedObject:
        """Delete a stored response."""
        return self._transport.call(route_call("DELETE", _RESPONSE, DeletedObject, response_id))

    def list(self, *, limit: int | None = None, order: str | None = None, after: str | None = None,
             conversation_id: str | None = None) -> SyncPage[ListedResponse]:  # fmt: skip
        """Stored responses (only those made in ``conversation_id``, ferryman's own filter), a page at a time."""
        plan = _responses(limit, order, after, conversation_id)
        return SyncPage.fetch(self._transport, plan, by_cursor(ResponseList))

    def input_items(self, response_id: str, *, limit: int | None = None, order: str | None = None,
                    after: str | None = None) -> SyncPage[Item]:  # fmt: skip
        """The items a response was given, a page at a time."""
        plan = RequestPlan("GET", path(_RESPONSE + "/input_items", response_id), params=_paging(limit, order, after))
        return SyncPage.fetch(self._transport, plan, by_cursor(ItemList))


def _response(answer: httpx.Response) -> Response:
    return Response.model_validate_json(answer.content)


class Conversations(SyncResource):
    """``client.conversations``, with ``items`` beneath."""

    def __init__(self, transport: SyncTransport) -> None:
        super().__init__(transport)
        self.items = ConversationItems(transport)

    def create(self, *, items: Sequence[Any] = (), metadata: Mapping[str, str] | None = None) -> Conversation:
        """Create a conversation, with items if given."""
        plan = RequestPlan("POST", "/v1/conversations", json=body(items=items, metadata=metadata), idempotent=True)
        return self._transport.call(Call(plan, model(Conversation)))

    def retrieve(self, conversation_id: str) -> Conversation:
        """One conversation."""
        return self._transport.call(route_call("GET", _CONV, Conversation, conversation_id))

    def list(self, *, limit: int | None = None, order: str | None = None,
             after: str | None = None) -> SyncPage[Conversation]:  # fmt: skip
        """The conversations the caller may read, newest first by default, a page at a time (ferryman's own)."""
        return SyncPage.fetch(self._transport, _conversations(limit, order, after), by_cursor(ConversationList))

    def update(self, conversation_id: str, *, metadata: Mapping[str, str]) -> Conversation:
        """Replace a conversation's metadata."""
        return self._transport.call(
            route_call("POST", _CONV, Conversation, conversation_id, json=body(metadata=metadata))
        )

    def delete(self, conversation_id: str) -> DeletedObject:
        """Delete a conversation with its items."""
        return self._transport.call(route_call("DELETE", _CONV, DeletedObject, conversation_id))

    def fork(self, conversation_id: str, *, item_id: str, metadata: Mapping[str, str] | None = None) -> Conversation:
        """A new conversation whose items are this one's up to and including ``item_id``; the original is untouched."""
        return self._transport.call(_fork(conversation_id, item_id, metadata))


class ConversationItems(SyncResource):
    """``client.conversations.items``."""

    def create(self, conversation_id: str, *, items: Sequence[Any]) -> ItemList:
        """Append items to a conversation."""
        return self._transport.call(_add_items(conversation_id, items))

    def retrieve(self, conversation_id: str, item_id: str) -> Item:
        """One item."""
        return self._transport.call(Call(RequestPlan("GET", path(_CONV + "/items/{}", conversation_id, item_id)),
                                         _ITEM))  # fmt: skip

    def list(self, conversation_id: str, *, limit: int | None = None, order: str | None = None,
             after: str | None = None) -> SyncPage[Item]:  # fmt: skip
        """A conversation's items, a page at a time."""
        plan = RequestPlan("GET", path(_CONV + "/items", conversation_id), params=_paging(limit, order, after))
        return SyncPage.fetch(self._transport, plan, by_cursor(ItemList))

    def delete(self, conversation_id: str, item_id: str) -> Conversation:
        """Delete one item; the answer is the conversation."""
        return self._transport.call(route_call("DELETE", _CONV + "/items/{}", Conversation, conversation_id, item_id))


class AsyncResponses(AsyncResource):
    """``client.responses`` of an ``AsyncClient``."""

    @overload
    async def create(self, *, model: str, input: Any = "", stream: Literal[False] = False,
                     **options: Any) -> Response: ...  # fmt: skip

    @overload
    async def create(self, *, model: str, input: Any = "", stream: Literal[True],
                     **options: Any) -> AsyncStream[ResponseData]: ...  # fmt: skip

    async def create(self, *, model: str, input: Any = "", stream: bool = False,
                     **options: Any) -> Response | AsyncStream[ResponseData]:  # fmt: skip
        """Create a response; with ``stream=True`` its events (see ``Responses.create``)."""
        plan = _create(model, input, stream, options)
        if stream:
            return AsyncStream(self._transport, plan, ResponseStreamKind())
        return await self._transport.call(Call(plan, _response))

    async def compact(self, *, model: str, input: Any = None, previous_response_id: str | None = None,
                      **options: Any) -> CompactedResponse:  # fmt: skip
        """Summarize a conversation into a ``compaction`` item (see :meth:`Responses.compact`)."""
        return await self._transport.call(_compact(model, input, previous_response_id, options))

    async def retrieve(self, response_id: str) -> Response:
        """One response."""
        return await self._transport.call(route_call("GET", _RESPONSE, Response, response_id))

    def stream(self, response_id: str, *, starting_after: int | None = None) -> AsyncStream[ResponseData]:
        """A response's events from the start (or after event ``starting_after``), live while it runs."""
        return AsyncStream(self._transport, _replay(response_id, starting_after), ResponseStreamKind(response_id))

    async def cancel(self, response_id: str) -> Response:
        """Cancel a background response."""
        return await self._transport.call(route_call("POST", _RESPONSE + "/cancel", Response, response_id))

    async def delete(self, response_id: str) -> DeletedObject:
        """Delete a stored response."""
        return await self._transport.call(route_call("DELETE", _RESPONSE, DeletedObject, response_id))

    async def list(self, *, limit: int | None = None, order: str | None = None, after: str | None = None,
                   conversation_id: str | None = None) -> AsyncPage[ListedResponse]:  # fmt: skip
        """Stored responses (only those made in ``conversation_id``, ferryman's own filter), a page at a time."""
        plan = _responses(limit, order, after, conversation_id)
        return await AsyncPage.fetch(self._transport, plan, by_cursor(ResponseList))


class AsyncConversations(AsyncResource):
    """``client.conversations`` of an ``AsyncClient``."""

    def __init__(self, transport: AsyncTransport) -> None:
        super().__init__(transport)
        self.items = AsyncConversationItems(transport)

    async def create(self, *, items: Sequence[Any] = (), metadata: Mapping[str, str] | None = None) -> Conversation:
        """Create a conversation, with items if given."""
        plan = RequestPlan("POST", "/v1/conversations", json=body(items=items, metadata=metadata), idempotent=True)
        return await self._transport.call(Call(plan, model(Conversation)))

    async def retrieve(self, conversation_id: str) -> Conversation:
        """One conversation."""
        return await self._transport.call(route_call("GET", _CONV, Conversation, conversation_id))

    async def list(self, *, limit: int | None = None, order: str | None = None,
                   after: str | None = None) -> AsyncPage[Conversation]:  # fmt: skip
        """The conversations the caller may read, newest first by default, a page at a time (ferryman's own)."""
        plan = _conversations(limit, order, after)
        return await AsyncPage.fetch(self._transport, plan, by_cursor(ConversationList))

    async def delete(self, conversation_id: str) -> DeletedObject:
        """Delete a conversation with its items."""
        return await self._transport.call(route_call("DELETE", _CONV, DeletedObject, conversation_id))

    async def fork(self, conversation_id: str, *, item_id: str,
                   metadata: Mapping[str, str] | None = None) -> Conversation:  # fmt: skip
        """A new conversation whose items are this one's up to and including ``item_id``; the original is untouched."""
        return await self._transport.call(_fork(conversation_id, item_id, metadata))


class AsyncConversationItems(AsyncResource):
    """``client.conversations.items`` of an ``AsyncClient``."""

    async def create(self, conversation_id: str, *, items: Sequence[Any]) -> ItemList:
        """Append items to a conversation."""
        return await self._transport.call(_add_items(conversation_id, items))

    async def list(self, conversation_id: str, *, limit: int | None = None, order: str | None = None,
                   after: str | None = None) -> AsyncPage[Item]:  # fmt: skip
        """A conversation's items, a page at a time."""
        plan = RequestPlan("GET", path(_CONV + "/items", conversation_id), params=_paging(limit, order, after))
        return await AsyncPage.fetch(self._transport, plan, by_cursor(ItemList))
