"""A bounded memory of finished responses' full histories, so chains are not re-read each turn."""

from __future__ import annotations

from collections import OrderedDict

from ferryman.api.content import Message


class HistoryCache:
    """Maps a response id to the messages up to and including it (least recently used goes first).

    A finished response's history holds the messages of every response along
    its ``previous_response_id`` chain; the store's chain stops at a deleted
    response. So deleting a response drops its entry and every entry whose
    chain may run through it (on every replica: see ``RecordDeleted``).
    """

    def __init__(self, capacity: int = 512) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        self._previous: dict[str, str | None] = {}

    def get(self, response_id: str) -> list[Message] | None:
        """The cached history, or None."""
        entry = self._entries.get(response_id)
        if entry is None:
            return None
        self._entries.move_to_end(response_id)
        return list(entry)

    def put(self, response_id: str, history: list[Message], previous_id: str | None) -> None:
        """Remember a finished response's history, and the response it continued."""
        self._entries[response_id] = tuple(history)
        self._previous[response_id] = previous_id
        self._entries.move_to_end(response_id)
        while len(self._entries) > self._capacity:
            evicted, _ = self._entries.popitem(last=False)
            del self._previous[evicted]

    def drop(self, response_id: str | None) -> None:
        """Forget a deleted response and every history that may hold it (None: forget everything)."""
        if response_id is None:
            self._entries.clear()
            self._previous.clear()
            return
        known: dict[str, bool] = {}
        for doomed in [entry for entry in self._entries if self._holds(entry, response_id, known)]:
            del self._entries[doomed]
            del self._previous[doomed]

    def _holds(self, entry: str, deleted: str, known: dict[str, bool]) -> bool:
        """Whether ``entry``'s chain runs through ``deleted``; a link not cached here counts as yes."""
        walked: list[str] = []
        current: str | None = entry
        while True:
            if current is None:
                holds = False
                break
            if current == deleted or current not in self._previous:
                holds = True
                break
            if current in known:
                holds = known[current]
                break
            walked.append(current)
            current = self._previous[current]
        known.update(dict.fromkeys(walked, holds))
        return holds
