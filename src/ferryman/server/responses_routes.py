"""Routes of the OpenAI Responses and Conversations APIs."""

from __future__ import annotations

import asyncio
from typing import Literal

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ferryman.api.responses import (
    AddItemsRequest,
    CreateConversationRequest,
    CreateResponseRequest,
    DeletedObject,
    Item,
    ItemList,
    ResponseList,
    UpdateConversationRequest,
)
from ferryman.errors import InvalidRequestError, error_for_code
from ferryman.services.responses.conversations import ConversationService
from ferryman.services.responses.service import ResponsesService
from ferryman.storage.base import Page

from .http import JSONModelResponse, last_event_id, parse_body, provider_data, query_bool, query_int, sse_response


def _order(request: Request, default: Literal["asc", "desc"]) -> str:
    order = request.query_params.get("order", default)
    if order not in ("asc", "desc"):
        raise InvalidRequestError("order must be 'asc' or 'desc'", "order")
    return order


def _paging(request: Request, default_order: Literal["asc", "desc"]) -> tuple[str | None, int, str]:
    limit = query_int(request, "limit", 20, minimum=1) or 20
    if limit > 100:
        raise InvalidRequestError("limit must be at most 100", "limit")
    return request.query_params.get("after") or None, limit, _order(request, default_order)


def _item_list(page: Page[Item]) -> ItemList:
    ids = [item.id for item in page.items]
    return ItemList(
        data=page.items, first_id=ids[0] if ids else None, last_id=ids[-1] if ids else None, has_more=page.has_more
    )


def response_routes(responses: ResponsesService, conversations: ConversationService) -> list[BaseRoute]:
    """Routes over the two services."""

    async def create(request: Request) -> Response:
        body = await parse_body(request, CreateResponseRequest)
        live = await responses.create(body, provider_data(request))
        if body.stream:
            return sse_response(live.channel.read())
        if body.background:
            return JSONModelResponse(live.recorder.response)
        assert live.task is not None
        result = await asyncio.shield(live.task)
        if result.status == "failed" and result.error is not None:
            raise error_for_code(result.error.code, f"response {result.id} failed: {result.error.message}")
        return JSONModelResponse(result)

    async def retrieve(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        if query_bool(request, "stream"):
            # ``starting_after`` is OpenAI's; ``Last-Event-ID`` is what SSE clients send on their own.
            after = query_int(request, "starting_after", None, minimum=-1)
            if after is None:
                after = last_event_id(request)
            return sse_response(await responses.replay(response_id, -1 if after is None else after))
        return JSONModelResponse(await responses.get(response_id))

    async def delete(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        await responses.delete(response_id)
        return JSONModelResponse(DeletedObject(id=response_id, object="response"))

    async def cancel(request: Request) -> Response:
        return JSONModelResponse(await responses.cancel(request.path_params["response_id"]))

    async def input_items(request: Request) -> Response:
        page = await responses.input_items(request.path_params["response_id"], *_paging(request, "desc"))
        return JSONModelResponse(_item_list(page))

    async def list_responses(request: Request) -> Response:
        page = await responses.list(*_paging(request, "desc"))
        ids = [r.id for r in page.items]
        listing = ResponseList(
            data=page.items, first_id=ids[0] if ids else None, last_id=ids[-1] if ids else None, has_more=page.has_more
        )
        return JSONModelResponse(listing)

    async def create_conversation(request: Request) -> Response:
        body = await parse_body(request, CreateConversationRequest)
        return JSONModelResponse(await conversations.create(body))

    async def get_conversation(request: Request) -> Response:
        return JSONModelResponse(await conversations.get(request.path_params["conversation_id"]))

    async def update_conversation(request: Request) -> Response:
        body = await parse_body(request, UpdateConversationRequest)
        return JSONModelResponse(await conversations.update(request.path_params["conversation_id"], body.metadata))

    async def delete_conversation(request: Request) -> Response:
        conversation_id = request.path_params["conversation_id"]
        await conversations.delete(conversation_id)
        return JSONModelResponse(DeletedObject(id=conversation_id, object="conversation.deleted"))

    async def add_items(request: Request) -> Response:
        body = await parse_body(request, AddItemsRequest)
        stored = await conversations.add_items(request.path_params["conversation_id"], list(body.items))
        return JSONModelResponse(_item_list(Page(stored, False)))

    async def list_items(request: Request) -> Response:
        page = await conversations.list_items(request.path_params["conversation_id"], *_paging(request, "desc"))
        return JSONModelResponse(_item_list(page))

    async def get_item(request: Request) -> Response:
        p = request.path_params
        return JSONModelResponse(await conversations.get_item(p["conversation_id"], p["item_id"]))

    async def delete_item(request: Request) -> Response:
        p = request.path_params
        return JSONModelResponse(await conversations.delete_item(p["conversation_id"], p["item_id"]))

    conv = "/conversations/{conversation_id}"
    return [
        Route("/responses", create, methods=["POST"]),
        Route("/responses", list_responses, methods=["GET"]),
        Route("/responses/{response_id}", retrieve, methods=["GET"]),
        Route("/responses/{response_id}", delete, methods=["DELETE"]),
        Route("/responses/{response_id}/cancel", cancel, methods=["POST"]),
        Route("/responses/{response_id}/input_items", input_items, methods=["GET"]),
        Route("/conversations", create_conversation, methods=["POST"]),
        Route(conv, get_conversation, methods=["GET"]),
        Route(conv, update_conversation, methods=["POST"]),
        Route(conv, delete_conversation, methods=["DELETE"]),
        Route(f"{conv}/items", add_items, methods=["POST"]),
        Route(f"{conv}/items", list_items, methods=["GET"]),
        Route(f"{conv}/items/{{item_id}}", get_item, methods=["GET"]),
        Route(f"{conv}/items/{{item_id}}", delete_item, methods=["DELETE"]),
    ]
