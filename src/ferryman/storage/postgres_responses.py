"""The PostgreSQL tables of the Responses and Conversations APIs."""

from __future__ import annotations

import json

import asyncpg

from ferryman.api.content import Message
from ferryman.api.responses import Item
from ferryman.errors import InvalidRequestError, NotFoundError

from . import codec
from .base import ConversationRecord, Page, ResponseRecord
from .rows import ITEM, RESPONSE_COLUMNS, response_record

_CHAIN = """
WITH RECURSIVE chain(turn_id, previous_response_id, depth) AS (
    SELECT turn_id, previous_response_id, 0 FROM responses WHERE response_id = $1
    UNION ALL
    SELECT r.turn_id, r.previous_response_id, chain.depth + 1
    FROM responses r JOIN chain ON r.response_id = chain.previous_response_id
)
SELECT m.id, m.body FROM chain JOIN messages m ON m.turn_id = chain.turn_id ORDER BY chain.depth DESC, m.id
"""


async def _insert_items(c: asyncpg.Connection, owner: str, items: list[Item]) -> None:
    if not items:
        return
    try:
        await c.executemany(
            "INSERT INTO items (item_id, owner, body) VALUES ($1, $2, $3)",
            [(item.id, owner, item.model_dump_json()) for item in items],
        )
    except asyncpg.UniqueViolationError as exc:
        raise InvalidRequestError(f"an item id is already used in '{owner}'", "items") from exc


async def _upsert_response(c: asyncpg.Connection, record: ResponseRecord) -> None:
    response = record.response
    await c.execute(
        "INSERT INTO responses (response_id, turn_id, session_id, conversation_id, previous_response_id, status, "
        "background, body, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (response_id) "
        "DO UPDATE SET status = excluded.status, body = excluded.body",
        response.id,
        record.turn_id,
        record.session_id,
        record.conversation_id,
        record.previous_response_id,
        response.status,
        record.background,
        response.model_dump_json(),
        response.created_at,
    )


async def _row_id(c: asyncpg.Connection, sql: str, *args: str) -> int:
    row_id = await c.fetchval(sql, *args)
    if row_id is None:
        raise NotFoundError(f"'{args[-1]}' not found")
    return int(row_id)


class PgResponseTables:
    """Responses, their events, conversations and items over an asyncpg pool."""

    _pool: asyncpg.Pool
    _messages: codec.MessageCache

    async def create_conversation(self, record: ConversationRecord, items: list[Item]) -> None:
        """Store a conversation with its first items."""
        async with self._pool.acquire() as c, c.transaction():
            await c.execute(
                "INSERT INTO conversations (conversation_id, session_id, metadata, created_at) VALUES ($1, $2, $3, $4)",
                record.conversation_id,
                record.session_id,
                json.dumps(record.metadata),
                record.created_at,
            )
            await _insert_items(c, record.conversation_id, items)

    async def get_conversation(self, conversation_id: str) -> ConversationRecord:
        """Return a conversation or raise NotFoundError."""
        row = await self._pool.fetchrow(
            "SELECT conversation_id, session_id, metadata, created_at FROM conversations WHERE conversation_id = $1",
            conversation_id,
        )
        if row is None:
            raise NotFoundError(f"conversation '{conversation_id}' not found")
        return ConversationRecord(row[0], row[1], json.loads(row[2]), row[3])

    async def update_conversation(self, conversation_id: str, metadata: dict[str, str]) -> ConversationRecord:
        """Replace a conversation's metadata."""
        status = await self._pool.execute(
            "UPDATE conversations SET metadata = $1 WHERE conversation_id = $2", json.dumps(metadata), conversation_id
        )
        if status.endswith(" 0"):
            raise NotFoundError(f"conversation '{conversation_id}' not found")
        return await self.get_conversation(conversation_id)

    async def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation and its items; responses that used it stay."""
        async with self._pool.acquire() as c, c.transaction():
            status = await c.execute("DELETE FROM conversations WHERE conversation_id = $1", conversation_id)
            await c.execute("DELETE FROM items WHERE owner = $1", conversation_id)
        if status.endswith(" 0"):
            raise NotFoundError(f"conversation '{conversation_id}' not found")

    async def add_items(self, owner: str, items: list[Item]) -> None:
        """Append items to a conversation or a response's input."""
        async with self._pool.acquire() as c, c.transaction():
            await _insert_items(c, owner, items)

    async def list_items(self, owner: str, after: str | None, limit: int, order: str) -> Page[Item]:
        """A page of an owner's items."""
        descending = order == "desc"
        async with self._pool.acquire() as c:
            cursor_id = None
            if after:
                sql = "SELECT id FROM items WHERE owner = $1 AND item_id = $2"
                cursor_id = await _row_id(c, sql, owner, after)
            sign, direction = ("<", "DESC") if descending else (">", "ASC")
            rows = await c.fetch(
                f"SELECT body FROM items WHERE owner = $1 AND ($2::bigint IS NULL OR id {sign} $2) "  # noqa: S608
                f"ORDER BY id {direction} LIMIT $3",
                owner,
                cursor_id,
                limit + 1,
            )
        return Page([ITEM.validate_json(r[0]) for r in rows[:limit]], len(rows) > limit)

    async def all_items(self, owner: str) -> list[Item]:
        """Every item of an owner, oldest first."""
        rows = await self._pool.fetch("SELECT body FROM items WHERE owner = $1 ORDER BY id", owner)
        return [ITEM.validate_json(r[0]) for r in rows]

    async def get_item(self, owner: str, item_id: str) -> Item:
        """One item of an owner."""
        body = await self._pool.fetchval("SELECT body FROM items WHERE owner = $1 AND item_id = $2", owner, item_id)
        if body is None:
            raise NotFoundError(f"item '{item_id}' not found in '{owner}'")
        return ITEM.validate_json(body)

    async def delete_item(self, owner: str, item_id: str) -> None:
        """Delete one item of an owner."""
        status = await self._pool.execute("DELETE FROM items WHERE owner = $1 AND item_id = $2", owner, item_id)
        if status.endswith(" 0"):
            raise NotFoundError(f"item '{item_id}' not found in '{owner}'")

    async def save_response(self, record: ResponseRecord) -> None:
        """Store or update a response."""
        async with self._pool.acquire() as c:
            await _upsert_response(c, record)

    async def finish_response(self, record: ResponseRecord, events: list[str], conversation_items: list[Item]) -> None:
        """Store a finished response, its events and its conversation's new items in one transaction."""
        async with self._pool.acquire() as c, c.transaction():
            await _upsert_response(c, record)
            await c.executemany(
                "INSERT INTO response_events (response_id, seq, body) VALUES ($1, $2, $3) "
                "ON CONFLICT (response_id, seq) DO UPDATE SET body = excluded.body",
                [(record.response.id, seq, body) for seq, body in enumerate(events)],
            )
            if record.conversation_id and conversation_items:
                await _insert_items(c, record.conversation_id, conversation_items)

    async def get_response(self, response_id: str) -> ResponseRecord:
        """Return a response or raise NotFoundError."""
        row = await self._pool.fetchrow(
            f"SELECT {RESPONSE_COLUMNS} FROM responses WHERE response_id = $1",  # noqa: S608
            response_id,
        )
        if row is None:
            raise NotFoundError(f"response '{response_id}' not found")
        return response_record(row)

    async def list_responses(self, after: str | None, limit: int, order: str) -> Page[ResponseRecord]:
        """A page of responses."""
        descending = order == "desc"
        async with self._pool.acquire() as c:
            cursor_id = None
            if after:
                cursor_id = await _row_id(c, "SELECT id FROM responses WHERE response_id = $1", after)
            sign, direction = ("<", "DESC") if descending else (">", "ASC")
            rows = await c.fetch(
                f"SELECT {RESPONSE_COLUMNS} FROM responses WHERE ($1::bigint IS NULL OR id {sign} $1) "  # noqa: S608
                f"ORDER BY id {direction} LIMIT $2",
                cursor_id,
                limit + 1,
            )
        return Page([response_record(r) for r in rows[:limit]], len(rows) > limit)

    async def delete_response(self, response_id: str) -> None:
        """Delete a response, its input items and the turn (and session) it ran as."""
        async with self._pool.acquire() as c, c.transaction():
            row = await c.fetchrow(
                "SELECT turn_id, session_id, conversation_id FROM responses WHERE response_id = $1", response_id
            )
            if row is None:
                raise NotFoundError(f"response '{response_id}' not found")
            await c.execute("DELETE FROM items WHERE owner = $1", response_id)
            await c.execute("DELETE FROM responses WHERE response_id = $1", response_id)
            if row[2] is None:
                await c.execute("DELETE FROM sessions WHERE session_id = $1", row[1])
            else:
                await c.execute("DELETE FROM turns WHERE turn_id = $1", row[0])

    async def events_after(self, response_id: str, after: int) -> list[str]:
        """Stored events with a sequence number above ``after``."""
        rows = await self._pool.fetch(
            "SELECT body FROM response_events WHERE response_id = $1 AND seq > $2 ORDER BY seq", response_id, after
        )
        return [r[0] for r in rows]

    async def chain_history(self, response_id: str) -> list[Message]:
        """Messages of every response along the ``previous_response_id`` chain, oldest first."""
        rows = await self._pool.fetch(_CHAIN, response_id)
        return self._messages.load([(r[0], r[1]) for r in rows])
