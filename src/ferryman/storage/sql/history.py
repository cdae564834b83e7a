"""Reading a turn's history in SQL: the turns completed since what this replica keeps, and the turn's own messages.

The history is the messages of the session's completed turns that started before the turn, then its own, each
turn's kept together (a turn resumed after later turns ran appends late, yet its calls and their answers stay
adjacent). What a replica keeps, and when it is stale, is :mod:`ferryman.storage.history_cache`'s. The read is
driven from the session's turns in their order (``turns_of_session``), each turn's messages in theirs
(``messages_of_turn``), and the turn's own by its id: SQLite merges the two in order, sorting nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.api.content import Message
from ferryman.storage.codec import MessageCache
from ferryman.storage.history_cache import Histories, HistoryRow, Kept
from ferryman.storage.sql.seam import Row, Work, count, first, rows

_SINCE = (
    "SELECT t.id, TRUE, t.turn_id = :turn_id, m.id, m.body FROM turns t JOIN messages m ON m.turn_id = t.turn_id "
    "WHERE t.session_id = :session_id AND t.id > :after AND t.status = 'completed' "
    "UNION ALL "
    "SELECT t.id, FALSE, TRUE, m.id, m.body FROM turns t JOIN messages m ON m.turn_id = t.turn_id "
    "WHERE t.turn_id = :turn_id AND t.session_id = :session_id AND NOT (t.id > :after AND t.status = 'completed') "
    "ORDER BY 1, 4"
)
"""The messages of the session's turns completed after turn order ``after``, and turn ``turn_id``'s own.

Two reads, each on its index (the session's turns from ``after`` on; the turn by id): one read with ``OR`` went
through all the session's turns, a fifth of a millisecond at 1,000 turns."""
_EPOCH = (
    "SELECT history_epoch, (SELECT id FROM turns WHERE turn_id = :turn_id) FROM sessions WHERE session_id = :session_id"
)
_BUMP = "UPDATE sessions SET history_epoch = history_epoch + 1 WHERE session_id = :session_id"
_OVERTAKEN = (
    "UPDATE sessions SET history_epoch = history_epoch + 1 WHERE session_id = :session_id "
    "AND EXISTS (SELECT 1 FROM turns WHERE session_id = :session_id AND status = 'completed' "
    "AND id > (SELECT id FROM turns WHERE turn_id = :turn_id))"
)


@dataclass
class HistoryRows:
    """What a unit of work read of a history, for :meth:`SqlHistories.loaded` after it."""

    session_id: str
    kept: Kept
    before: int | None
    """The turn's own start order (None: a turn not stored yet, after every completed one)."""
    rows: list[HistoryRow]


class SqlHistories:
    """Sessions' histories read in SQL, extending what this replica keeps of them.

    Args:
        messages: Decoded messages by row.
    """

    def __init__(self, messages: MessageCache) -> None:
        self._histories = Histories(messages)

    def read(self, session_id: str, turn_id: str, epoch: int, before: int | None) -> Work[HistoryRows]:
        """Read (in the unit that yields from it) what is missing of turn ``turn_id``'s history, at ``epoch``."""
        kept = self._histories.kept.known(session_id, epoch)
        found: list[Row] = yield rows(_SINCE, session_id=session_id, turn_id=turn_id, after=kept.after)
        return HistoryRows(session_id, kept, before, [(r[0], bool(r[1]), bool(r[2]), r[3], r[4]) for r in found])

    def read_alone(self, session_id: str, turn_id: str) -> Work[HistoryRows | None]:
        """Read a history in a unit of its own: the session's epoch first (None: no such session)."""
        row = yield first(_EPOCH, session_id=session_id, turn_id=turn_id)
        if row is None:
            return None
        return (yield from self.read(session_id, turn_id, row[0], row[1]))

    def loaded(self, read: HistoryRows | None) -> list[Message]:
        """The history read (none: nothing was)."""
        if read is None:
            return []
        return self._histories.loaded(read.session_id, read.kept, read.before, read.rows)

    def gone(self, session_id: str) -> list[Message]:
        """The history of a session that does not exist (deleted): none, and nothing kept of it."""
        return self._histories.gone(session_id)


def overtaken(session_id: str, turn_id: str) -> Work[None]:
    """Bump the session's epoch if a turn completed now started before one completed already (not an append)."""
    yield count(_OVERTAKEN, session_id=session_id, turn_id=turn_id)


def changed(session_id: str) -> Work[None]:
    """Bump the session's epoch: its completed turns changed other than by an append (a turn deleted)."""
    yield count(_BUMP, session_id=session_id)
