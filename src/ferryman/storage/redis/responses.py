"""Responses (in OpenAI form) in Redis, and what a conversation's create and a response's start and end write
beside the kernel's records.

A conversation, its items and a response's events and input items are the kernel's (``storage/domain``): a
script that stores some beside its own keys runs the kernel's batch it embeds.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import cast

from ferryman.api.content import Message
from ferryman.api.responses import Item
from ferryman.storage.base import (
    ConversationRecord,
    KeySettlement,
    ResponseRecord,
    ResponseStart,
    SessionRecord,
)
from ferryman.storage.domain.agents import sessions
from ferryman.storage.domain.conversations import conversation_writes
from ferryman.storage.domain.items import item_puts, refusing_repeats
from ferryman.storage.domain.kinds import CONVERSATION as CONVERSATION_KIND
from ferryman.storage.domain.kinds import RESPONSE as RESPONSE_KIND
from ferryman.storage.domain.kinds import SESSION as SESSION_KIND
from ferryman.storage.domain.responses import events_written, head_of, response_heads
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.redis.idempotency import settlement_args
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.lua_responses import (
    CHAIN_HISTORY,
    CREATE_CONVERSATION,
    DELETE_RESPONSE,
    FINISH_RESPONSE,
    START_RESPONSE,
    CreateConversation,
    DeleteResponse,
    FinishResponse,
    ResponseId,
    StartResponse,
)
from ferryman.storage.redis.records import RESPONSE_FIELDS, response_columns, response_of, turn_start_args
from ferryman.storage.redis.scripts import RedisBase
from ferryman.storage.redis.store_keys import (
    RESPONSE,
    TURN,
    message_row,
)


class RedisResponses(RedisBase):
    """Responses, and the writes of conversations and responses with the kernel's records, over the backend's
    scripts."""

    kernel: RedisKernel

    async def create_conversation(
        self,
        record: ConversationRecord,
        items: list[Item],
        owner: Owner | None = None,
        settle: KeySettlement | None = None,
        session: SessionRecord | None = None,
    ) -> None:
        """Store a conversation's record (with its owner), its first items and ``settle``'s key outcome, in one
        script, opening ``session`` in it when given.

        Raises:
            NotFoundError: its session does not exist.
            ConflictError: the id is taken.
            InvalidRequestError: an item id repeats.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        batch = conversation_writes(self.kernel, record, items, owner, opens_session=session is not None)
        opened = [] if session is None else [sessions(self.kernel).put(session, owner=owner)]
        create = CreateConversation(
            **self.kernel.embedded([*opened, *batch]),
            **settlement_args(settle),
            opens_session=session is not None,
            session_id=record.session_id,
        )
        await self._run(CREATE_CONVERSATION, create)

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
        session = start.session
        fields = {
            **asdict(response_columns(start.record)),
            **turn_start_args(start.turn, start.messages, owner),
            **settlement_args(settle),
        }
        opened = [] if session is None else [sessions(self.kernel).put(session, owner=owner)]
        head = response_heads(self.kernel).put(head_of(start.record), owner=owner)
        conversation_id = start.record.conversation_id
        # The conversation the service read may have been deleted since: no response starts in it then.
        held: list[ops.Op] = [] if conversation_id is None else [ops.Check(CONVERSATION_KIND, conversation_id)]
        records = [*held, *opened, head, *item_puts(start.record.response.id, start.items)]
        args = StartResponse(**fields, **self.kernel.embedded(records), opens_session=session is not None)
        await self._run(START_RESPONSE, args)

    async def finish_response(self, record: ResponseRecord, events: list[str], conversation_items: list[Item]) -> None:
        """Store a finished response, its events (JSON data) and its conversation's new items, all or nothing.

        Raises:
            InvalidRequestError: an item id is used in the conversation already, or repeats (nothing is stored).
        """
        conversation_id = record.conversation_id
        puts = item_puts(conversation_id, conversation_items) if conversation_id else []
        columns = asdict(response_columns(record))
        finish = FinishResponse(**columns, **self.kernel.embedded([events_written(record.response.id, events), *puts]))
        with refusing_repeats(conversation_id or ""):  # the rest is an upsert
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

    async def chain_history(self, response_id: str) -> list[Message]:
        """Messages of every response along the ``previous_response_id`` chain, oldest first."""
        entries = await self._run(CHAIN_HISTORY, ResponseId(response_id=response_id))
        return self._messages.load([message_row(entry) for entry in entries])
