"""Responses, their stream events, conversations and items (in OpenAI form), in Redis.

An owner's items (a conversation's, or a response's input) are a sorted set of
item ids in insertion order beside a hash of their bodies, so an item id is
unique per owner and a page after a cursor is a score range.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import cast

from ferryman.api.content import Message
from ferryman.api.responses import Item
from ferryman.errors import InvalidRequestError, NotFoundError
from ferryman.storage.base import (
    ConversationRecord,
    KeySettlement,
    ResponseRecord,
    ResponseStart,
    SessionRecord,
    StoredEvent,
)
from ferryman.storage.domain.agents import sessions
from ferryman.storage.domain.conversations import conversations
from ferryman.storage.domain.kinds import CONVERSATION as CONVERSATION_KIND
from ferryman.storage.domain.kinds import RESPONSE as RESPONSE_KIND
from ferryman.storage.domain.kinds import SESSION as SESSION_KIND
from ferryman.storage.domain.responses import head_of, response_heads
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.page import Page
from ferryman.storage.redis.idempotency import settlement_args
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.lua_responses import (
    ADD_ITEMS,
    CHAIN_HISTORY,
    CREATE_CONVERSATION,
    DELETE_CONVERSATION,
    DELETE_RESPONSE,
    FINISH_RESPONSE,
    REPLACE_ITEMS,
    START_RESPONSE,
    AddItems,
    CreateConversation,
    DeleteConversation,
    DeleteResponse,
    FinishResponse,
    ReplaceItems,
    ResponseId,
    StartResponse,
)
from ferryman.storage.redis.records import RESPONSE_FIELDS, response_columns, response_of, turn_start_args
from ferryman.storage.redis.scripts import RedisBase
from ferryman.storage.redis.store_keys import (
    ITEM_BODIES,
    ITEMS,
    RESPONSE,
    RESPONSE_EVENTS,
    TURN,
    message_row,
    stored_event,
)
from ferryman.storage.rows import ITEM


def _item_columns(items: list[Item]) -> tuple[list[str], list[str]]:
    """The items' ids and JSON bodies."""
    ids: list[str] = []
    for item in items:
        if item.id is None:
            raise InvalidRequestError("a stored item needs an id", "items")
        ids.append(item.id)
    return ids, [item.model_dump_json() for item in items]


class RedisResponses(RedisBase):
    """Responses, their events, conversations and items over the backend's scripts."""

    kernel: RedisKernel

    async def create_conversation(
        self,
        record: ConversationRecord,
        items: list[Item],
        owner: Owner | None = None,
        settle: KeySettlement | None = None,
        session: SessionRecord | None = None,
    ) -> None:
        """Store a conversation's record (with its owner), its anchor, its first items and ``settle``'s key
        outcome, in one script, opening ``session`` in it when given.

        Raises:
            NotFoundError: its session does not exist.
            ConflictError: the id is taken.
            InvalidRequestError: an item id repeats.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        ids, bodies = _item_columns(items)
        put = conversations(self.kernel).put(record, owner=owner)
        opened = [] if session is None else [sessions(self.kernel).put(session, owner=owner)]
        create = CreateConversation(
            **self.kernel.embedded([*opened, put]),
            **settlement_args(settle),
            opens_session=session is not None,
            conversation_id=record.conversation_id,
            session_id=record.session_id,
            item_ids=ids,
            item_bodies=bodies,
        )
        await self._run(CREATE_CONVERSATION, create)

    async def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation's record, its anchor and its items, in one script; responses made in it stay."""
        delete = ops.Delete(CONVERSATION_KIND, conversation_id)
        args = DeleteConversation(**self.kernel.embedded([delete]), conversation_id=conversation_id)
        if not self.kernel.embedded_results([delete], await self._run(DELETE_CONVERSATION, args))[0]:
            raise NotFoundError(f"conversation '{conversation_id}' not found")

    async def add_items(self, owner: str, items: list[Item], settle: KeySettlement | None = None) -> None:
        """Append items to a conversation or a response's input, with ``settle``'s key outcome, in one script;
        none if an id repeats (InvalidRequestError)."""
        if items or settle is not None:
            ids, bodies = _item_columns(items)
            args = AddItems(owner=owner, item_ids=ids, item_bodies=bodies, **settlement_args(settle))
            await self._run(ADD_ITEMS, args)

    async def replace_items(self, owner: str, items: list[Item]) -> None:
        """Replace the bodies of an owner's items, matched by id, in place; an id it does not hold is left out."""
        if items:
            ids, bodies = _item_columns(items)
            await self._run(REPLACE_ITEMS, ReplaceItems(owner=owner, item_ids=ids, item_bodies=bodies))

    async def _items(self, owner: str, after: str, count: int, descending: bool = False) -> list[Item]:
        missing = NotFoundError(f"item '{after}' not found in '{owner}'")
        ids = await self._ids(self._keys.of(ITEMS, owner), count, after=after, descending=descending, missing=missing)
        if not ids:
            return []
        bodies = await self._db.hmget(self._keys.of(ITEM_BODIES, owner), ids)
        return [ITEM.validate_json(body) for body in bodies if body is not None]

    async def list_items(self, owner: str, after: str | None, limit: int, order: str) -> Page[Item]:
        """Items of an owner in order ``asc`` or ``desc``, after the item ``after`` (of this owner)."""
        items = await self._items(owner, after or "", limit + 1, descending=order == "desc")
        return Page(items[:limit], len(items) > limit)

    async def items_of(self, owners: list[str]) -> dict[str, list[Item]]:
        """Every item of each of these owners, oldest first, read at one moment in one trip (an owner without
        items: absent)."""
        distinct = list(dict.fromkeys(owners))
        if not distinct:
            return {}
        async with self._db.pipeline(transaction=True) as pipe:
            for owner in distinct:
                pipe.zrange(self._keys.of(ITEMS, owner), 0, -1)
                pipe.hgetall(self._keys.of(ITEM_BODIES, owner))
            found = await pipe.execute()
        items: dict[str, list[Item]] = {}
        for owner, ids, bodies in zip(distinct, found[::2], found[1::2], strict=True):
            kept = [ITEM.validate_json(bodies[item_id]) for item_id in ids if item_id in bodies]
            if kept:
                items[owner] = kept
        return items

    async def get_item(self, owner: str, item_id: str) -> Item:
        """One item of an owner, or NotFoundError."""
        body = await self._db.hget(self._keys.of(ITEM_BODIES, owner), item_id)
        if body is None:
            raise NotFoundError(f"item '{item_id}' not found in '{owner}'")
        return ITEM.validate_json(body)

    async def delete_item(self, owner: str, item_id: str) -> None:
        """Delete one item of an owner or raise NotFoundError."""
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.zrem(self._keys.of(ITEMS, owner), item_id)
            pipe.hdel(self._keys.of(ITEM_BODIES, owner), item_id)
            removed, _ = await pipe.execute()
        if not removed:
            raise NotFoundError(f"item '{item_id}' not found in '{owner}'")

    async def start_response(
        self, start: ResponseStart, settle: KeySettlement | None = None, owner: Owner | None = None
    ) -> None:
        """Store a new response with its record, its new session (if any), its turn and its input items, their
        owner (in the response's and the session's records) and its request's idempotency key outcome, in one
        script.

        Raises:
            NotFoundError: the turn's session does not exist.
            ConflictError: the new session or the response exists, or the session runs another turn or has some
                queued.
            IdempotencyKeyInUseError: ``settle``'s claim no longer holds its key.
            InvalidRequestError: an input item id repeats.
        """
        ids, bodies = _item_columns(list(start.items))
        session = start.session
        fields = {
            **asdict(response_columns(start.record)),
            **turn_start_args(start.turn, start.messages, owner),
            **settlement_args(settle),
        }
        opened = [] if session is None else [sessions(self.kernel).put(session, owner=owner)]
        records = [*opened, response_heads(self.kernel).put(head_of(start.record), owner=owner)]
        args = StartResponse(
            **fields,
            **self.kernel.embedded(records),
            input_ids=ids,
            input_bodies=bodies,
            opens_session=session is not None,
        )
        await self._run(START_RESPONSE, args)

    async def finish_response(self, record: ResponseRecord, events: list[str], conversation_items: list[Item]) -> None:
        """Store a finished response, its events (JSON data) and its conversation's new items, all or nothing."""
        ids, bodies = _item_columns(conversation_items) if record.conversation_id else ([], [])
        finish = FinishResponse(**asdict(response_columns(record)), events=events, item_ids=ids, item_bodies=bodies)
        await self._run(FINISH_RESPONSE, finish)

    async def responses_by_id(self, response_ids: list[str]) -> list[ResponseRecord]:
        """The responses with these ids that exist, in the order given (their hashes read at one moment, in one
        trip)."""
        rows = await self._records(self._keys.base(RESPONSE), response_ids, RESPONSE_FIELDS)
        return [response_of(row[1:]) for row in rows if row[1] is not None]

    async def turn_response(self, session_id: str, turn_id: str) -> str | None:
        """The response the session's turn runs for (held in the turn's own hash)."""
        owner, response_id = cast(
            list[str | None], await self._db.hmget(self._keys.of(TURN, turn_id), ["session_id", "response_id"])
        )
        return response_id or None if owner == session_id else None

    async def delete_response(self, response_id: str) -> None:
        """Delete a response's record, the response with its items and events, and the turn it ran as; outside a
        conversation, its session (record and anchor) too, in the same script."""
        # The script fills in the session's id, or drops its delete: it alone reads whether the response had a
        # session of its own.
        deletes = [ops.Delete(RESPONSE_KIND, response_id), ops.Delete(SESSION_KIND, "")]
        await self._run(DELETE_RESPONSE, DeleteResponse(**self.kernel.embedded(deletes), response_id=response_id))

    async def events_after(self, response_id: str, after: int) -> list[StoredEvent]:
        """The stored stream events of a response with a sequence number above ``after``."""
        members = await self._db.zrangebyscore(self._keys.of(RESPONSE_EVENTS, response_id), f"({after}", "+inf")
        return [stored_event(cast(str, member)) for member in members]

    async def chain_history(self, response_id: str) -> list[Message]:
        """Messages of every response along the ``previous_response_id`` chain, oldest first."""
        entries = await self._run(CHAIN_HISTORY, ResponseId(response_id=response_id))
        return self._messages.load([message_row(entry) for entry in entries])
