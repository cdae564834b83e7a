"""JSON encoding of the nested parts of records (messages, steps, times)."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import repeat
from operator import is_
from typing import cast

from pydantic import TypeAdapter

from ferryman.api.agents import Step
from ferryman.api.content import CompletionMessage, Message, TurnInputMessage

_messages = TypeAdapter(list[Message])
_message = TypeAdapter(Message)
_inputs = TypeAdapter(list[TurnInputMessage])
_step = TypeAdapter(Step)


def dump_message(message: Message) -> str:
    """Encode one history message."""
    return message.model_dump_json()


def load_messages(rows: list[str]) -> list[Message]:
    """Decode history messages in one pass."""
    return _messages.validate_json("[" + ",".join(rows) + "]")


def dump_inputs(messages: list[TurnInputMessage]) -> str:
    """Encode a turn's input messages."""
    return _inputs.dump_json(messages).decode()


def load_inputs(text: str) -> list[TurnInputMessage]:
    """Decode a turn's input messages."""
    return _inputs.validate_json(text)


def dump_step(step: Step) -> str:
    """Encode a step."""
    return step.model_dump_json()


def load_step(text: str) -> Step:
    """Decode a step."""
    return _step.validate_json(text)


def load_completion(text: str | None) -> CompletionMessage | None:
    """Decode an assistant message."""
    return CompletionMessage.model_validate_json(text) if text else None


def dump_time(moment: datetime | None) -> str | None:
    """Encode an aware datetime as ISO 8601 in UTC."""
    return moment.astimezone(UTC).isoformat() if moment else None


def load_time(text: str | None) -> datetime | None:
    """Decode an ISO 8601 timestamp."""
    return datetime.fromisoformat(text) if text else None


def require_time(text: str) -> datetime:
    """Decode a timestamp that is never null."""
    return datetime.fromisoformat(text)


class MessageCache:
    """Decoded history messages by the id of their row, so a long history is not re-decoded every turn.

    An entry is used only while its row still holds the body it was decoded from: a row id can be
    reused (SQLite hands out a deleted last row's id again, and a redacted turn's messages are
    rewritten), and comparing two strings costs far less than decoding one. The oldest entries go
    first once ``capacity`` is reached.
    """

    def __init__(self, capacity: int = 200_000) -> None:
        self._capacity = capacity
        self._entries: dict[int, tuple[str, Message]] = {}

    def load(self, rows: list[tuple[int, str]]) -> list[Message]:
        """The messages of ``(row id, JSON body)`` rows, in order."""
        get = self._entries.get
        found = [entry[1] if (entry := get(row_id)) is not None and entry[0] == body else None for row_id, body in rows]
        # One pass over a long history's rows (most of them known), and a test of its gaps at C speed: ``None in``
        # would compare each message with None by its own __eq__.
        if any(map(is_, found, repeat(None))):
            self._decode(rows, found)
        return cast(list[Message], found)

    def _decode(self, rows: list[tuple[int, str]], found: list[Message | None]) -> None:
        """Fill the gaps of ``found`` by decoding their rows, and keep what was decoded."""
        entries = self._entries
        missing = [index for index, message in enumerate(found) if message is None]
        decoded = load_messages([rows[index][1] for index in missing])
        for index, message in zip(missing, decoded, strict=True):
            row_id, body = rows[index]
            entries.pop(row_id, None)  # a rewritten row moves to the young end
            entries[row_id] = (body, message)
            found[index] = message
        while len(entries) > self._capacity:
            del entries[next(iter(entries))]


def frame_data(stored: str) -> str:
    """The JSON data of a stream event as an older version stored it, a whole SSE frame; data passes unchanged.

    Frames were ``id: N\\ndata: {json}\\n\\n`` (turns) or ``id: N\\nevent: TYPE\\ndata: {json}\\n\\n``
    (responses); data is a JSON object, so it never starts with a field name. For upgrades of stored data.
    """
    if stored.startswith("{"):
        return stored
    lines = [line for line in stored.split("\n") if line.startswith("data:")]
    return "\n".join(line[len("data: ") :] if line.startswith("data: ") else line[len("data:") :] for line in lines)
