"""The Responses API's records: responses and what a response's start and end write beside the kernel's records
(a conversation, its items and a response's events are the kernel's: ``storage/domain``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ferryman.api.content import Message
from ferryman.api.responses import Item
from ferryman.errors import NotFoundError
from ferryman.storage import codec
from ferryman.storage.base import (
    ConversationRecord,
    KeySettlement,
    ResponseRecord,
    ResponseStart,
    SessionRecord,
)
from ferryman.storage.domain.conversations import conversation_writes
from ferryman.storage.domain.items import item_puts, refusing_repeats
from ferryman.storage.domain.kinds import CONVERSATION, RESPONSE
from ferryman.storage.domain.responses import events_written, head_of, response_heads
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.rows import response_record
from ferryman.storage.sql import domain_tables as t
from ferryman.storage.sql.agents import insert_session, remove_session
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import RESPONSE_COLUMNS
from ferryman.storage.sql.history import changed
from ferryman.storage.sql.idempotency import claimed, settled
from ferryman.storage.sql.seam import Driver, Work, count, first, rows
from ferryman.storage.sql.tables import records
from ferryman.storage.sql.turns import insert_turn

if TYPE_CHECKING:
    from ferryman.storage.sql.kernel import SqlKernel

_CHAIN = """
WITH RECURSIVE chain(turn_id, previous_response_id, depth) AS (
    SELECT turn_id, previous_response_id, 0 FROM responses WHERE response_id = :response_id
    UNION ALL
    SELECT r.turn_id, r.previous_response_id, chain.depth + 1
    FROM responses r JOIN chain ON r.response_id = chain.previous_response_id
)
SELECT m.id, m.body FROM chain JOIN messages m ON m.turn_id = chain.turn_id ORDER BY chain.depth DESC, m.id
"""


def _upsert_response(record: ResponseRecord) -> Work[None]:
    response = record.response
    yield count(
        "INSERT INTO responses (response_id, turn_id, session_id, conversation_id, previous_response_id, status, "
        "background, body, created_at) VALUES (:response_id, :turn_id, :session_id, :conversation_id, "
        ":previous_response_id, :status, :background, :body, :created_at) "
        "ON CONFLICT (response_id) DO UPDATE SET status = excluded.status, body = excluded.body",
        response_id=response.id,
        turn_id=record.turn_id,
        session_id=record.session_id,
        conversation_id=record.conversation_id,
        previous_response_id=record.previous_response_id,
        status=response.status,
        background=record.background,
        body=response.model_dump_json(),
        created_at=response.created_at,
    )


def _insert_response(
    kernel: SqlKernel, record: ResponseRecord, items: Sequence[Item], owner: Owner | None
) -> Work[None]:
    """Store a new response, its input items and its record with its owner (None: none), in the unit that yields
    from this."""
    head = response_heads(kernel).put(head_of(record), owner=owner)
    yield from kernel.writes_within([head, *item_puts(record.response.id, items)])
    yield from _upsert_response(record)


def _responses(d: SqlDialect) -> Compiled:
    """The responses of list ``:ids``."""
    R = t.responses.c
    return d.compiled("responses.get", lambda: sa.select(*RESPONSE_COLUMNS).where(d.one_of(R.response_id, "ids")))


def _conversation_kept(d: SqlDialect, conversation_id: str) -> Work[bool]:
    """Whether a conversation's record is there, then held until the unit commits (a delete of it waits, or the
    unit waits on the delete, then finds it gone)."""
    R = records.c
    statement = d.compiled(
        "responses.conversation_kept",
        lambda: (
            sa.select(sa.literal_column("1"))
            .where(R.kind == CONVERSATION.name, R.id == p("conversation_id"))
            .with_for_update(read=True, key_share=True)
        ),
    )
    found = yield statement.first(conversation_id=conversation_id)
    return found is not None


class ResponseTables:
    """Responses and the writes of conversations and responses with the kernel's records, over a :class:`Driver`."""

    _db: Driver
    _messages: codec.MessageCache
    kernel: SqlKernel

    async def create_conversation(
        self,
        record: ConversationRecord,
        items: list[Item],
        owner: Owner | None = None,
        settle: KeySettlement | None = None,
        session: SessionRecord | None = None,
    ) -> None:
        """Store a conversation's record (with its owner), its first items and ``settle``'s key outcome, in one
        transaction, opening ``session`` in it when given.

        Raises:
            NotFoundError: its session does not exist.
            ConflictError: the id is taken.
            InvalidRequestError: an item id repeats.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        batch = conversation_writes(self.kernel, record, items, owner, opens_session=session is not None)
        d = self._db.dialect

        def work() -> Work[None]:
            yield from claimed(d, settle)  # first: a repeat finds the key held and writes nothing
            if session is not None:
                yield from insert_session(self.kernel, session, owner)
            yield from self.kernel.writes_within(batch)
            yield from settled(d, settle)

        await self._db.write(work())

    async def start_response(
        self, start: ResponseStart, settle: KeySettlement | None = None, owner: Owner | None = None
    ) -> None:
        """Store a new response with its new session (if any), its turn and its input items, their owner and its
        request's idempotency key outcome, in one transaction."""
        d = self._db.dialect

        def work() -> Work[None]:
            yield from claimed(d, settle)
            conversation_id = start.record.conversation_id
            if conversation_id is not None and not (yield from _conversation_kept(d, conversation_id)):
                # Deleted since the service read it: no response starts in it.
                raise NotFoundError(f"conversation '{conversation_id}' not found")
            if start.session is not None:
                yield from insert_session(self.kernel, start.session, owner)
            yield from insert_turn(d, start.turn, start.messages, owner)
            yield from _insert_response(self.kernel, start.record, start.items, owner)
            yield from settled(d, settle)

        await self._db.write(work())

    async def finish_response(self, record: ResponseRecord, events: list[str], conversation_items: list[Item]) -> None:
        """Store a finished response, its events (JSON data, numbered from 0) and its conversation's new items.

        Raises:
            InvalidRequestError: an item id is used in the conversation already, or repeats (nothing is stored).
        """
        response_id, conversation_id = record.response.id, record.conversation_id
        puts = item_puts(conversation_id, conversation_items) if conversation_id else []

        def work() -> Work[None]:
            yield from _upsert_response(record)
            yield from self.kernel.writes_within([events_written(response_id, events)])
            if conversation_id and puts:
                # A conversation deleted while the response ran takes no items: they would belong to nothing.
                if (yield from _conversation_kept(self._db.dialect, conversation_id)):
                    yield from self.kernel.writes_within(puts)

        with refusing_repeats(conversation_id or ""):  # the rest is an upsert
            await self._db.write(work())

    async def responses_by_id(self, response_ids: list[str]) -> list[ResponseRecord]:
        """The responses with these ids that exist, in the order given."""
        if not response_ids:
            return []
        d = self._db.dialect
        found = await self._db.read(_responses(d).rows(ids=d.array(sorted(set(response_ids)))))
        by_id = {record.response.id: record for record in map(response_record, found)}
        return [by_id[response_id] for response_id in response_ids if response_id in by_id]

    async def turn_response(self, session_id: str, turn_id: str) -> str | None:
        """The response the session's turn runs for (``turn_id`` is unique: an index read)."""
        row = await self._db.read(
            first(
                "SELECT response_id FROM responses WHERE turn_id = :turn_id AND session_id = :session_id",
                turn_id=turn_id,
                session_id=session_id,
            )
        )
        return None if row is None else str(row[0])

    async def delete_response(self, response_id: str) -> None:
        """Delete a response, its record (its input items with it) and the turn (and session) it ran as."""

        def work() -> Work[bool]:
            row = yield first(
                "SELECT turn_id, session_id, conversation_id FROM responses WHERE response_id = :response_id",
                response_id=response_id,
            )
            if row is None:
                return False
            if row[2] is not None:  # a conversation's turn goes: its history changes (its row first, as everywhere)
                yield from changed(row[1])
            yield count("DELETE FROM responses WHERE response_id = :response_id", response_id=response_id)
            yield from self.kernel.writes_within([ops.Delete(RESPONSE, response_id)])
            if row[2] is None:
                yield from remove_session(self.kernel, row[1])
            else:
                yield count("DELETE FROM turns WHERE turn_id = :turn_id", turn_id=row[0])
            return True

        if not await self._db.write(work()):
            raise NotFoundError(f"response '{response_id}' not found")

    async def chain_history(self, response_id: str) -> list[Message]:
        """Messages of every response along the ``previous_response_id`` chain, oldest first."""
        found = await self._db.read(rows(_CHAIN, response_id=response_id))
        return self._messages.load([(r[0], r[1]) for r in found])
