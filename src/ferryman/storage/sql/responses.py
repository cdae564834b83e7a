"""The Responses and Conversations APIs' records: conversations, items, responses and their events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ferryman.api.content import Message
from ferryman.api.responses import Item
from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError
from ferryman.storage import codec
from ferryman.storage.base import (
    ConversationRecord,
    KeySettlement,
    Page,
    ResponseRecord,
    ResponseStart,
    SessionRecord,
    StoredEvent,
)
from ferryman.storage.domain.conversations import conversations
from ferryman.storage.domain.kinds import CONVERSATION, RESPONSE
from ferryman.storage.domain.responses import head_of, response_heads
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.rows import ITEM, response_record
from ferryman.storage.sql import domain_tables as t
from ferryman.storage.sql.agents import insert_session, remove_session
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import RESPONSE_COLUMNS
from ferryman.storage.sql.history import changed
from ferryman.storage.sql.idempotency import claimed, settled
from ferryman.storage.sql.seam import Driver, ForeignKeyViolation, Row, UniqueViolation, Work, count, each, first, rows
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


def _insert_items(owner: str, items: list[Item]) -> Work[None]:
    try:
        yield each(
            "INSERT INTO items (item_id, owner, body) VALUES (:item_id, :owner, :body)",
            [{"item_id": item.id, "owner": owner, "body": item.model_dump_json()} for item in items],
        )
    except UniqueViolation as exc:
        raise InvalidRequestError(f"an item id is already used in '{owner}'", "items") from exc


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
    yield from kernel.writes_within([response_heads(kernel).put(head_of(record), owner=owner)])
    yield from _upsert_response(record)
    if items:
        yield from _insert_items(record.response.id, list(items))


def _row_id(sql: str, missing: str, **params: str) -> Work[int]:
    # The same item id can stand under several owners (a response's input and its conversation).
    row = yield first(sql, **params)
    if row is None:
        raise NotFoundError(missing)
    return int(row[0])


ITEMS = t.items.c


def _item_page(d: SqlDialect, *, after: bool, descending: bool) -> Compiled:
    """A page of ``:owner``'s items, ``:limit`` of them, past the row ``:cursor`` (when ``after``)."""

    def build() -> sa.Select[tuple[str]]:
        query = sa.select(ITEMS.body).where(ITEMS.owner == p("owner"))
        if after:
            query = query.where(ITEMS.id < p("cursor") if descending else ITEMS.id > p("cursor"))
        return query.order_by(ITEMS.id.desc() if descending else ITEMS.id.asc()).limit(p("limit"))

    return d.compiled(("responses.items", after, descending), build)


def _items_of(d: SqlDialect) -> Compiled:
    return d.compiled(
        "responses.items_of",
        lambda: sa.select(ITEMS.owner, ITEMS.body).where(d.one_of(ITEMS.owner, "owners")).order_by(ITEMS.id),
    )


def _responses(d: SqlDialect) -> Compiled:
    """The responses of list ``:ids``."""
    R = t.responses.c
    return d.compiled("responses.get", lambda: sa.select(*RESPONSE_COLUMNS).where(d.one_of(R.response_id, "ids")))


def _conversation_kept(d: SqlDialect, conversation_id: str) -> Work[bool]:
    """Whether a conversation is there, then held until the unit commits (a delete of it waits, or the unit waits
    on the delete, then finds it gone)."""
    C = t.conversations.c
    statement = d.compiled(
        "responses.conversation_kept",
        lambda: (
            sa.select(sa.literal_column("1"))
            .where(C.conversation_id == p("conversation_id"))
            .with_for_update(read=True, key_share=True)
        ),
    )
    found = yield statement.first(conversation_id=conversation_id)
    return found is not None


class ResponseTables:
    """Responses, their events, conversations and items, over a :class:`Driver`."""

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
        """Store a conversation's record (with its owner), its anchor, its first items and ``settle``'s key
        outcome, in one transaction, opening ``session`` in it when given.

        Raises:
            ConflictError: the id is taken.
            InvalidRequestError: an item id repeats.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        put = conversations(self.kernel).put(record, owner=owner)
        d = self._db.dialect

        def work() -> Work[None]:
            yield from claimed(d, settle)  # first: a repeat finds the key held and writes nothing
            if session is not None:
                yield from insert_session(self.kernel, session, owner)
            yield from self.kernel.writes_within([put])
            try:
                yield count(
                    "INSERT INTO conversations (conversation_id, session_id) VALUES (:conversation_id, :session_id)",
                    conversation_id=record.conversation_id,
                    session_id=record.session_id,
                )
            except UniqueViolation as exc:
                raise ConflictError(f"conversation '{record.conversation_id}' already exists") from exc
            except ForeignKeyViolation as exc:
                raise NotFoundError(f"session '{record.session_id}' not found") from exc
            yield from _insert_items(record.conversation_id, items)
            yield from settled(d, settle)

        await self._db.write(work())

    async def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation's record, its anchor and its items; responses made in it stay."""

        def work() -> Work[bool]:
            yield count("DELETE FROM conversations WHERE conversation_id = :owner", owner=conversation_id)
            yield count("DELETE FROM items WHERE owner = :owner", owner=conversation_id)
            (deleted,) = yield from self.kernel.writes_within([ops.Delete(CONVERSATION, conversation_id)])
            return bool(deleted)

        if not await self._db.write(work()):
            raise NotFoundError(f"conversation '{conversation_id}' not found")

    async def add_items(self, owner: str, items: list[Item], settle: KeySettlement | None = None) -> None:
        """Append items to a conversation or a response's input, with ``settle``'s key outcome."""
        d = self._db.dialect

        def work() -> Work[None]:
            yield from claimed(d, settle)  # first: a repeat finds the key held and writes nothing
            yield from _insert_items(owner, items)
            yield from settled(d, settle)

        await self._db.write(work())

    async def replace_items(self, owner: str, items: list[Item]) -> None:
        """Replace the bodies of an owner's items, matched by id, in place; an id it does not hold is left out."""
        await self._db.write(
            each(
                "UPDATE items SET body = :body WHERE owner = :owner AND item_id = :item_id",
                [{"owner": owner, "item_id": item.id, "body": item.model_dump_json()} for item in items],
            )
        )

    async def list_items(self, owner: str, after: str | None, limit: int, order: str) -> Page[Item]:
        """A page of an owner's items."""

        def work() -> Work[list[Row]]:
            cursor_id = None
            if after:
                sql = "SELECT id FROM items WHERE owner = :owner AND item_id = :item_id"
                cursor_id = yield from _row_id(
                    sql, f"item '{after}' not found in '{owner}'", owner=owner, item_id=after
                )
            page = _item_page(self._db.dialect, after=cursor_id is not None, descending=order == "desc")
            found: list[Row] = yield page.rows(owner=owner, cursor=cursor_id, limit=limit + 1)
            return found

        found = await self._db.read(work())
        return Page([ITEM.validate_json(r[0]) for r in found[:limit]], len(found) > limit)

    async def items_of(self, owners: list[str]) -> dict[str, list[Item]]:
        """Every item of each of these owners, oldest first, in one read (an owner without items: absent)."""
        if not owners:
            return {}
        d = self._db.dialect
        found = await self._db.read(_items_of(d).rows(owners=d.array(sorted(set(owners)))))
        items: dict[str, list[Item]] = {}
        for owner, body in found:
            items.setdefault(owner, []).append(ITEM.validate_json(body))
        return items

    async def get_item(self, owner: str, item_id: str) -> Item:
        """One item of an owner."""
        row = await self._db.read(
            first("SELECT body FROM items WHERE owner = :owner AND item_id = :item_id", owner=owner, item_id=item_id)
        )
        if row is None:
            raise NotFoundError(f"item '{item_id}' not found in '{owner}'")
        return ITEM.validate_json(row[0])

    async def delete_item(self, owner: str, item_id: str) -> None:
        """Delete one item of an owner."""
        deleted = await self._db.write(
            count("DELETE FROM items WHERE owner = :owner AND item_id = :item_id", owner=owner, item_id=item_id)
        )
        if not deleted:
            raise NotFoundError(f"item '{item_id}' not found in '{owner}'")

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
        """Store a finished response, its events (JSON data, numbered from 0) and its conversation's new items."""
        response_id = record.response.id

        def work() -> Work[None]:
            yield from _upsert_response(record)
            yield each(
                "INSERT INTO response_events (response_id, seq, body) VALUES (:response_id, :seq, :body) "
                "ON CONFLICT (response_id, seq) DO UPDATE SET body = excluded.body",
                [{"response_id": response_id, "seq": seq, "body": data} for seq, data in enumerate(events)],
            )
            if record.conversation_id and conversation_items:
                # A conversation deleted while the response ran takes no items: they would belong to nothing.
                if (yield from _conversation_kept(self._db.dialect, record.conversation_id)):
                    yield from _insert_items(record.conversation_id, conversation_items)

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
        """Delete a response, its input items and the turn (and session) it ran as."""

        def work() -> Work[bool]:
            row = yield first(
                "SELECT turn_id, session_id, conversation_id FROM responses WHERE response_id = :response_id",
                response_id=response_id,
            )
            if row is None:
                return False
            if row[2] is not None:  # a conversation's turn goes: its history changes (its row first, as everywhere)
                yield from changed(row[1])
            yield count("DELETE FROM items WHERE owner = :response_id", response_id=response_id)
            yield count("DELETE FROM responses WHERE response_id = :response_id", response_id=response_id)
            yield from self.kernel.writes_within([ops.Delete(RESPONSE, response_id)])
            if row[2] is None:
                yield from remove_session(self.kernel, row[1])
            else:
                yield count("DELETE FROM turns WHERE turn_id = :turn_id", turn_id=row[0])
            return True

        if not await self._db.write(work()):
            raise NotFoundError(f"response '{response_id}' not found")

    async def events_after(self, response_id: str, after: int) -> list[StoredEvent]:
        """Stored events with a sequence number above ``after``."""
        found = await self._db.read(
            rows(
                "SELECT seq, body FROM response_events WHERE response_id = :response_id AND seq > :after ORDER BY seq",
                response_id=response_id,
                after=after,
            )
        )
        return [StoredEvent(r[0], r[1]) for r in found]

    async def chain_history(self, response_id: str) -> list[Message]:
        """Messages of every response along the ``previous_response_id`` chain, oldest first."""
        found = await self._db.read(rows(_CHAIN, response_id=response_id))
        return self._messages.load([(r[0], r[1]) for r in found])
