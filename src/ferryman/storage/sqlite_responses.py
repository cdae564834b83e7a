"""The SQLite tables of the Responses and Conversations APIs."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ferryman.api.content import Message
from ferryman.api.responses import Item
from ferryman.errors import InvalidRequestError, NotFoundError

from . import codec
from .base import ConversationRecord, Page, ResponseRecord
from .rows import ITEM, RESPONSE_COLUMNS, response_record
from .sqlite_conn import SqliteRunner

_CHAIN = """
WITH RECURSIVE chain(turn_id, previous_response_id, depth) AS (
    SELECT turn_id, previous_response_id, 0 FROM responses WHERE response_id = ?
    UNION ALL
    SELECT r.turn_id, r.previous_response_id, chain.depth + 1
    FROM responses r JOIN chain ON r.response_id = chain.previous_response_id
)
SELECT m.id, m.body FROM chain JOIN messages m ON m.turn_id = chain.turn_id ORDER BY chain.depth DESC, m.id
"""


def _insert_items(c: sqlite3.Connection, owner: str, items: list[Item]) -> None:
    try:
        c.executemany(
            "INSERT INTO items (item_id, owner, body) VALUES (?, ?, ?)",
            [(item.id, owner, item.model_dump_json()) for item in items],
        )
    except sqlite3.IntegrityError as exc:
        raise InvalidRequestError(f"an item id is already used in '{owner}'", "items") from exc


def _upsert_response(c: sqlite3.Connection, record: ResponseRecord) -> None:
    response = record.response
    c.execute(
        "INSERT INTO responses (response_id, turn_id, session_id, conversation_id, previous_response_id, status, "
        "background, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(response_id) DO UPDATE SET "
        "status = excluded.status, body = excluded.body",
        (
            response.id,
            record.turn_id,
            record.session_id,
            record.conversation_id,
            record.previous_response_id,
            response.status,
            int(record.background),
            response.model_dump_json(),
            response.created_at,
        ),
    )


class ResponseTables:
    """Responses, their events, conversations and items, over a :class:`SqliteRunner`."""

    _db: SqliteRunner
    _messages: codec.MessageCache

    async def create_conversation(self, record: ConversationRecord, items: list[Item]) -> None:
        """Store a conversation with its first items."""

        def work(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO conversations (conversation_id, session_id, metadata, created_at) VALUES (?, ?, ?, ?)",
                (record.conversation_id, record.session_id, json.dumps(record.metadata), record.created_at),
            )
            _insert_items(c, record.conversation_id, items)

        await self._db.write(work)

    async def get_conversation(self, conversation_id: str) -> ConversationRecord:
        """Return a conversation or raise NotFoundError."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT conversation_id, session_id, metadata, created_at FROM conversations WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
        )
        if row is None:
            raise NotFoundError(f"conversation '{conversation_id}' not found")
        return ConversationRecord(row[0], row[1], json.loads(row[2]), row[3])

    async def update_conversation(self, conversation_id: str, metadata: dict[str, str]) -> ConversationRecord:
        """Replace a conversation's metadata."""
        updated = await self._db.write(
            lambda c: (
                c.execute(
                    "UPDATE conversations SET metadata = ? WHERE conversation_id = ?",
                    (json.dumps(metadata), conversation_id),
                ).rowcount
            )
        )
        if not updated:
            raise NotFoundError(f"conversation '{conversation_id}' not found")
        return await self.get_conversation(conversation_id)

    async def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation and its items; responses that used it stay."""

        def work(c: sqlite3.Connection) -> int:
            deleted = c.execute("DELETE FROM conversations WHERE conversation_id = ?", (conversation_id,)).rowcount
            c.execute("DELETE FROM items WHERE owner = ?", (conversation_id,))
            return int(deleted)

        if not await self._db.write(work):
            raise NotFoundError(f"conversation '{conversation_id}' not found")

    async def add_items(self, owner: str, items: list[Item]) -> None:
        """Append items to a conversation or a response's input."""
        await self._db.write(lambda c: _insert_items(c, owner, items))

    async def list_items(self, owner: str, after: str | None, limit: int, order: str) -> Page[Item]:
        """A page of an owner's items."""
        descending = order == "desc"

        def work(c: sqlite3.Connection) -> list[Any]:
            cursor_id = _item_row_id(c, owner, after) if after else None
            sign, direction = ("<", "DESC") if descending else (">", "ASC")
            bound = f" AND id {sign} ?" if cursor_id is not None else ""
            args: tuple[Any, ...] = (owner, cursor_id) if cursor_id is not None else (owner,)
            sql = f"SELECT body FROM items WHERE owner = ?{bound} ORDER BY id {direction} LIMIT ?"  # noqa: S608
            return c.execute(sql, (*args, limit + 1)).fetchall()

        rows = await self._db.read(work)
        return Page([ITEM.validate_json(r[0]) for r in rows[:limit]], len(rows) > limit)

    async def all_items(self, owner: str) -> list[Item]:
        """Every item of an owner, oldest first."""
        rows = await self._db.read(
            lambda c: c.execute("SELECT body FROM items WHERE owner = ? ORDER BY id", (owner,)).fetchall()
        )
        return [ITEM.validate_json(r[0]) for r in rows]

    async def get_item(self, owner: str, item_id: str) -> Item:
        """One item of an owner."""
        row = await self._db.read(
            lambda c: c.execute("SELECT body FROM items WHERE owner = ? AND item_id = ?", (owner, item_id)).fetchone()
        )
        if row is None:
            raise NotFoundError(f"item '{item_id}' not found in '{owner}'")
        return ITEM.validate_json(row[0])

    async def delete_item(self, owner: str, item_id: str) -> None:
        """Delete one item of an owner."""
        deleted = await self._db.write(
            lambda c: c.execute("DELETE FROM items WHERE owner = ? AND item_id = ?", (owner, item_id)).rowcount
        )
        if not deleted:
            raise NotFoundError(f"item '{item_id}' not found in '{owner}'")

    async def save_response(self, record: ResponseRecord) -> None:
        """Store or update a response."""
        await self._db.write(lambda c: _upsert_response(c, record))

    async def finish_response(self, record: ResponseRecord, events: list[str], conversation_items: list[Item]) -> None:
        """Store a finished response, its events and its conversation's new items in one transaction."""
        response_id = record.response.id

        def work(c: sqlite3.Connection) -> None:
            _upsert_response(c, record)
            c.executemany(
                "INSERT OR REPLACE INTO response_events (response_id, seq, body) VALUES (?, ?, ?)",
                [(response_id, seq, body) for seq, body in enumerate(events)],
            )
            if record.conversation_id and conversation_items:
                _insert_items(c, record.conversation_id, conversation_items)

        await self._db.write(work)

    async def get_response(self, response_id: str) -> ResponseRecord:
        """Return a response or raise NotFoundError."""
        row = await self._db.read(
            lambda c: c.execute(
                f"SELECT {RESPONSE_COLUMNS} FROM responses WHERE response_id = ?",  # noqa: S608
                (response_id,),
            ).fetchone()
        )
        if row is None:
            raise NotFoundError(f"response '{response_id}' not found")
        return response_record(row)

    async def list_responses(self, after: str | None, limit: int, order: str) -> Page[ResponseRecord]:
        """A page of responses."""
        descending = order == "desc"

        def work(c: sqlite3.Connection) -> list[Any]:
            cursor_id = _row_id(c, "responses", "response_id", after) if after else None
            sign, direction = ("<", "DESC") if descending else (">", "ASC")
            where = f"WHERE id {sign} ?" if cursor_id is not None else ""
            args: tuple[Any, ...] = (cursor_id,) if cursor_id is not None else ()
            sql = f"SELECT {RESPONSE_COLUMNS} FROM responses {where} ORDER BY id {direction} LIMIT ?"  # noqa: S608
            return c.execute(sql, (*args, limit + 1)).fetchall()

        rows = await self._db.read(work)
        return Page([response_record(r) for r in rows[:limit]], len(rows) > limit)

    async def delete_response(self, response_id: str) -> None:
        """Delete a response, its input items and the turn (and session) it ran as."""

        def work(c: sqlite3.Connection) -> int:
            row = c.execute(
                "SELECT turn_id, session_id, conversation_id FROM responses WHERE response_id = ?", (response_id,)
            ).fetchone()
            if row is None:
                return 0
            c.execute("DELETE FROM items WHERE owner = ?", (response_id,))
            c.execute("DELETE FROM responses WHERE response_id = ?", (response_id,))
            if row[2] is None:
                c.execute("DELETE FROM sessions WHERE session_id = ?", (row[1],))
            else:
                c.execute("DELETE FROM turns WHERE turn_id = ?", (row[0],))
            return 1

        if not await self._db.write(work):
            raise NotFoundError(f"response '{response_id}' not found")

    async def events_after(self, response_id: str, after: int) -> list[str]:
        """Stored events with a sequence number above ``after``."""
        rows = await self._db.read(
            lambda c: c.execute(
                "SELECT body FROM response_events WHERE response_id = ? AND seq > ? ORDER BY seq", (response_id, after)
            ).fetchall()
        )
        return [r[0] for r in rows]

    async def chain_history(self, response_id: str) -> list[Message]:
        """Messages of every response along the ``previous_response_id`` chain, oldest first."""
        rows = await self._db.read(lambda c: c.execute(_CHAIN, (response_id,)).fetchall())
        return self._messages.load(rows)


def _item_row_id(c: sqlite3.Connection, owner: str, item_id: str) -> int:
    # The same item id can stand under several owners (a response's input and its conversation).
    row = c.execute("SELECT id FROM items WHERE owner = ? AND item_id = ?", (owner, item_id)).fetchone()
    if row is None:
        raise NotFoundError(f"item '{item_id}' not found in '{owner}'")
    return int(row[0])


def _row_id(c: sqlite3.Connection, table: str, column: str, value: str) -> int:
    row = c.execute(f"SELECT id FROM {table} WHERE {column} = ?", (value,)).fetchone()  # noqa: S608
    if row is None:
        raise NotFoundError(f"'{value}' not found")
    return int(row[0])
