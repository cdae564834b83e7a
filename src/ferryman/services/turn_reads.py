"""Reading the Agents API's turns: a turn, one of its steps, its event stream, and the history it reads.

A fork's turns include those it shares with its source (``fork_reads.py``): each read
falls back to them when the session holds no such turn of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ferryman.api.agents import Step, ToolExecutionStep, Turn
from ferryman.api.content import Message
from ferryman.auth.principal import current_principal
from ferryman.errors import NotFoundError
from ferryman.storage.base import SessionRecord, StoredEvent

from .fork_reads import ForkReads
from .host import TurnHost
from .session_reads import SessionReads


def stream(turn_id: str) -> str:
    """The name of a turn's event stream."""
    return f"turn:{turn_id}"


async def stream_named(turn_id: str) -> str:
    """The name of a turn's event stream, as the turn queue asks for it (``turn_queue.py``)."""
    return stream(turn_id)


class TurnReads:
    """Reads of turns, their steps and events, for the Agents API.

    Args:
        host: Storage, its access step, and the turns' event streams.
        reads: The history and turns forks share with their sources.
        sessions: The sessions' records, each read checked for its caller.
    """

    def __init__(self, host: TurnHost, reads: ForkReads, sessions: SessionReads) -> None:
        self._host = host
        self._store = host.store
        self._reads = reads
        self._sessions = sessions

    async def session(self, agent_id: str, session_id: str) -> SessionRecord:
        """The agent's session, once the caller may read it.

        Raises:
            NotFoundError: the agent has no such session, or the caller may not read it.
        """
        return await self._sessions.get(current_principal.get(), agent_id, session_id)

    async def turn_events(self, agent_id: str, session_id: str, turn_id: str, after: int) -> AsyncIterator[StoredEvent]:
        """A turn's events numbered above ``after``: stored ones, then live ones until it ends (a turn a fork
        shares has ended: its events are its original's, read as the server)."""
        await self.session(agent_id, session_id)
        try:
            await self._store.get_turn_record(session_id, turn_id)
            shared = False
        except NotFoundError:
            await self._reads.inherited_turn(session_id, turn_id)
            shared = True
        if not shared:  # its own turn, which may be another caller's in a session this one may read
            await self._host.guard.check(current_principal.get(), "read", "turn", turn_id)

        async def stored_after(last: int) -> list[StoredEvent]:
            return await self._store.turn_events_after(turn_id, last)

        async def is_running() -> bool:
            if shared:
                return False
            try:
                return (await self._store.get_turn_record(session_id, turn_id)).status in ("in_progress", "queued")
            except NotFoundError:  # deleted while followed: its stream just ends
                return False

        return await self._host.events(stream(turn_id), after, stored_after, is_running)

    async def get_turn(self, agent_id: str, session_id: str, turn_id: str) -> Turn:
        """One turn with its completed steps (of a fork: its own, or one it shares, as its source holds it)."""
        await self.session(agent_id, session_id)
        turns = await self._store.list_turns([session_id], [turn_id])
        if not turns:
            return await self._reads.inherited_turn(session_id, turn_id)  # ended: never awaits approval
        turn = turns[0]
        if turn.status == "awaiting_input":
            await self._host.guard.check(current_principal.get(), "read", "turn", turn_id)
            pending = await self._store.pending_step(turn_id)
            if isinstance(pending, ToolExecutionStep) and pending.approval_requests:
                return turn.model_copy(update={"approval_requests": pending.approval_requests})
        return turn

    async def get_step(self, agent_id: str, session_id: str, turn_id: str, step_id: str) -> Step:
        """One step of a turn (of a fork: of its own turn, or of one it shares)."""
        await self.session(agent_id, session_id)
        try:
            return await self._store.get_step(session_id, turn_id, step_id)
        except NotFoundError as missing:
            try:
                shared = await self._reads.inherited_turn(session_id, turn_id)
            except NotFoundError:
                raise missing from None  # it names what is missing: the step of an own turn, or the turn
            found = next((step for step in shared.steps if step.step_id == step_id), None)
            if found is None:
                raise
            return found

    async def history(self, session_id: str, turn_id: str) -> list[Message]:
        """The history a turn reads: what its session shares (a fork's), then the session's own up to the turn."""
        shared = await self._reads.inherited_history(session_id)
        return [*shared, *await self._store.load_history(session_id, turn_id)]
