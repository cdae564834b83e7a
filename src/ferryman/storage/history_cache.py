"""Sessions' histories kept in memory, so that a long session's turn reads only what was added since the last.

A history is the messages of a session's completed turns in the order the turns started (then the reading
turn's own). Completing the newest turn appends to it; anything else that changes it (an older turn completed
after a newer one, a turn deleted) bumps the session's *history epoch* in the same transaction. A backend reads
the session's epoch, then the completed turns started after the newest it keeps: the same epoch means what it
keeps is still true and the new turns extend it; another epoch (or nothing kept) means it reads them all again.
The epoch is read first, so a change made between the two reads leaves a kept history under the old epoch,
which the next read finds stale.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ferryman.api.content import Message
from ferryman.storage.codec import MessageCache

MAX_KEPT_MESSAGES = 200_000
"""The most messages kept over all sessions; the sessions read longest ago go first."""
MAX_KEPT_SESSIONS = 4_096


@dataclass
class Kept:
    """One session's completed turns as read under an epoch: their messages in order, and where each turn's start.

    Attributes:
        epoch: The session's history epoch when they were read (-1: nothing was).
        orders: Each turn's start order, ascending.
        starts: Where each turn's messages start in ``messages``.
        messages: The turns' messages, each turn's together.
    """

    epoch: int
    orders: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)

    @property
    def after(self) -> int:
        """The start order of the newest turn kept (0: none): the next read asks for the turns after it."""
        return self.orders[-1] if self.orders else 0

    def copy(self) -> Kept:
        """A copy a reader extends without touching what others read."""
        return Kept(self.epoch, list(self.orders), list(self.starts), list(self.messages))

    def add(self, rows: list[tuple[int, Message]]) -> None:
        """Add the messages of turns read after :attr:`after`, each with its turn's start order, in turn order
        (those at or before it, read by a racing reader too, are skipped)."""
        newest = self.after
        for order, message in rows:
            if order <= newest:
                continue
            if self.orders[-1:] != [order]:
                self.orders.append(order)
                self.starts.append(len(self.messages))
            self.messages.append(message)

    def before(self, order: int | None) -> list[Message]:
        """The messages of the turns started before ``order`` (None: all of them), as a new list."""
        if order is None or not self.orders or order > self.orders[-1]:
            return list(self.messages)
        return self.messages[: self.starts[bisect.bisect_left(self.orders, order)]]


class HistoryCache:
    """Completed turns' messages by session, each session's under the epoch it was read at.

    Readers work on copies: what one reader keeps replaces what another kept, and either is true of its epoch
    (within an epoch a history only grows, and a shorter one is extended by the next read).
    """

    def __init__(self, max_messages: int = MAX_KEPT_MESSAGES, max_sessions: int = MAX_KEPT_SESSIONS) -> None:
        self._max_messages = max_messages
        self._max_sessions = max_sessions
        self._sessions: dict[str, Kept] = {}  # the session kept longest ago first
        self._messages = 0

    def kept(self, session_id: str) -> Kept:
        """A copy of what is kept of the session (nothing: empty, under epoch -1, which no session has)."""
        kept = self._sessions.get(session_id)
        return Kept(-1) if kept is None else kept.copy()

    def known(self, session_id: str, epoch: int) -> Kept:
        """A copy of what is kept of the session under ``epoch`` (empty: nothing, or only under another)."""
        kept = self.kept(session_id)
        return kept if kept.epoch == epoch else Kept(epoch)

    def keep(self, session_id: str, kept: Kept) -> None:
        """Keep a session's completed turns as read, in place of what was kept of it."""
        self.forget(session_id)
        self._sessions[session_id] = kept
        self._messages += len(kept.messages)
        while len(self._sessions) > 1 and (
            self._messages > self._max_messages or len(self._sessions) > self._max_sessions
        ):
            self.forget(next(iter(self._sessions)))

    def forget(self, session_id: str) -> None:
        """Drop what is kept of a session."""
        kept = self._sessions.pop(session_id, None)
        if kept is not None:
            self._messages -= len(kept.messages)


HistoryRow = tuple[int, bool, bool, int, str]
"""A message read of a history: its turn's start order, whether that turn is completed, whether it is the
reading turn's own, and the message's row id and JSON body."""


class Histories:
    """Sessions' histories as a backend reads them: decoded, what was completed kept for the next read.

    Args:
        messages: Decoded messages by row.
    """

    def __init__(self, messages: MessageCache) -> None:
        self.kept = HistoryCache()
        self._messages = messages

    def gone(self, session_id: str) -> list[Message]:
        """The history of a session that does not exist (deleted): none, and nothing kept of it."""
        self.kept.forget(session_id)
        return []

    def loaded(self, session_id: str, kept: Kept, before: int | None, rows: list[HistoryRow]) -> list[Message]:
        """The history of a turn started at order ``before`` (None: after every completed turn): ``kept`` (what
        was kept under the epoch read, a copy) with the turns completed after it in ``rows``, then the turn's own
        messages in ``rows``."""
        messages = self._messages.load([(row[3], row[4]) for row in rows])
        kept.add([(row[0], message) for row, message in zip(rows, messages, strict=True) if row[1]])
        self.kept.keep(session_id, kept)
        history = kept.before(before)
        history += [message for row, message in zip(rows, messages, strict=True) if row[2]]
        return history
