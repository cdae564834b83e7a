"""A bounded memory of finished responses' full histories, so chains are not re-read each turn."""

from __future__ import annotations

from collections import OrderedDict

from ferryman.api.content import Message


class HistoryCache:
    """Maps a response id to the messages up to and including it (least recently used goes first).

    A finished response's history never changes, so entries need no
    invalidation; a miss simply falls back to the store.
    """

    def __init__(self, capacity: int = 512) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, tuple[Message, ...]] = OrderedDict()

    def get(self, response_id: str) -> list[Message] | None:
        """The cached history, or None."""
        entry = self._entries.get(response_id)
        if entry is None:
            return None
        self._entries.move_to_end(response_id)
        return list(entry)

    def put(self, response_id: str, history: list[Message]) -> None:
        """Remember a finished response's history."""
        self._entries[response_id] = tuple(history)
        self._entries.move_to_end(response_id)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def drop(self, response_id: str) -> None:
        """Forget one response (it was deleted)."""
        self._entries.pop(response_id, None)
