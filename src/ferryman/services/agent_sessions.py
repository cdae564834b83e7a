"""The Agents API's sessions: opening, reading, forking and deleting them, with what lives beside each."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from ferryman.api.agents import Session, Turn
from ferryman.auth.principal import acting_as, current_principal
from ferryman.errors import NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.storage.base import Page, SessionRecord

from .agent_records import AgentRecords
from .fork_reads import ForkReads
from .forks import SessionForks
from .host import TurnHost
from .idempotency import Claim, CreatedRecord, forget_stored, settlement, stored_record
from .session_memory import SessionMemory
from .session_reads import SessionReads

_DELETE_BATCH = 500
"""How many of an agent's sessions its deletion reads at a time (a page is one script on Redis: kept short)."""


class AgentSessions:
    """Sessions of agents, and what is deleted with them.

    Args:
        host: Storage and its access step, and what cancels a session's running turn.
        agents: The agents' records, to check a session's agent.
        sessions: The sessions' records, each read checked for its caller.
        reads: The turns forks share with their sources.
        forks: Forks sessions, and moves what forks share of a session before it is deleted.
        memory: The sessions' own vector stores (None: none).
    """

    def __init__(
        self,
        host: TurnHost,
        agents: AgentRecords,
        sessions: SessionReads,
        reads: ForkReads,
        forks: SessionForks,
        memory: SessionMemory | None,
    ) -> None:
        self._host = host
        self._store = host.store
        self._guard = host.guard
        self._agents = agents
        self._sessions = sessions
        self._reads = reads
        self._forks = forks
        self._memory = memory
        self.deleted: list[Callable[[str], Awaitable[None]]] = []
        """What runs (``callback(session_id)``) after a session is deleted (with its agent or alone)."""

    async def create_session(self, agent_id: str, session_name: str, key: Claim | None = None) -> str:
        """Open a session of an agent (which the caller may read), with ``key`` (its request's idempotency key,
        claimed by the write that stores it); return its id.

        Raises:
            IdempotencyKeyHeldError: an earlier call with the key holds it (nothing is stored).
        """
        who = current_principal.get()
        await self._agents.get(who, agent_id)
        session = SessionRecord(new_id(), agent_id, session_name, utcnow())
        made = ("session", session.session_id)
        owner = self._guard.creating(who, made)
        await self._store.create_session(session, owner=owner, settle=settlement(key, CreatedRecord(*made)))
        self._guard.created(who, made)
        stored_record(key)
        self._reads.plain(session.session_id)
        await self._agent_kept(agent_id, session.session_id, key)
        return session.session_id

    async def _agent_kept(self, agent_id: str, session_id: str, key: Claim | None = None) -> None:
        """Undo a session opened as its agent was deleted (``key``, stored with it, forgotten first), and say the
        agent is missing.

        The agent is read again once the session is stored: an agent delete that ran between the first read
        and the write listed the agent's sessions before this one existed, and no key in storage refuses it.
        A delete that has not yet removed the record lists its sessions again after it (``delete_agent``).
        """
        try:
            await self._agents.get(None, agent_id)
        except NotFoundError:
            await forget_stored(self._store, key)  # first: a repeat must not be told of a session gone
            with acting_as(None), contextlib.suppress(NotFoundError):  # as the server: not the caller's delete
                await self._store.delete_session(agent_id, session_id)
                await self._forget_memory(session_id)
            raise

    async def get_session(self, agent_id: str, session_id: str, turn_ids: list[str] | None) -> Session:
        """A session with its turns (only those named, if ``turn_ids`` is given): a fork's shared ones first."""
        record = await self._sessions.get(current_principal.get(), agent_id, session_id)
        shared = await self._reads.inherited_turns(session_id)
        if turn_ids is not None:
            shared = [turn for turn in shared if turn.turn_id in turn_ids]
        turns = await self._store.list_turns([session_id], turn_ids)  # the session's read was checked
        return _session(record, [*shared, *turns])

    async def list_sessions(self, agent_id: str, start_index: int, limit: int | None) -> Page[Session]:
        """An agent's sessions with their turns, in creation order."""
        await self._agents.get(current_principal.get(), agent_id)
        page = await self._sessions.page(current_principal.get(), agent_id, start_index, limit)
        turns = await self._store.list_turns([s.session_id for s in page.items])  # readable ones only
        by_session = await self._reads.inherited_of([s.session_id for s in page.items])
        for turn in turns:
            by_session.setdefault(turn.session_id, []).append(turn)
        sessions = [_session(s, by_session.get(s.session_id, [])) for s in page.items]
        return Page(sessions, page.has_more)

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session with its turns, cancelling its running turn first; what forks share of it is first
        given to a holder (``forks.py``)."""
        who = current_principal.get()
        await self._sessions.get(who, agent_id, session_id, "delete")  # before stopping its turn
        await self._host.cancel_everywhere(session_id, "the session was deleted")
        async with self._forks.detached(session_id):
            await self._store.delete_session(agent_id, session_id)
        self._guard.deleted(who, "session", session_id)
        await self._forget_memory(session_id)

    async def fork_session(
        self, agent_id: str, session_id: str, turn_id: str, session_name: str | None, key: Claim | None = None
    ) -> str:
        """A new session sharing the session's history up to and including ``turn_id``, with ``key`` (its
        request's idempotency key, claimed by the write that stores it); its id (see ``forks.py``)."""
        await self._agents.get(current_principal.get(), agent_id)
        forked = await self._forks.fork_session(agent_id, session_id, turn_id, session_name, key)
        await self._agent_kept(agent_id, forked, key)
        return forked

    async def delete_all(self, agent_id: str) -> None:
        """Delete every session of an agent with its turns, and what lives beside each (as the server)."""
        with acting_as(None):
            seen: set[str] = set()
            # Each deleted session leaves the agent's index, so the first page is always what is left; one seen
            # again (its delete refused: an anchor of another agent's) ends the walk rather than looping on it.
            while batch := (await self._sessions.page(None, agent_id, 0, _DELETE_BATCH)).items:
                if seen.issuperset(session.session_id for session in batch):
                    return
                for session in batch:
                    seen.add(session.session_id)
                    try:
                        await self._store.delete_session(agent_id, session.session_id)
                    except NotFoundError:  # deleted meanwhile by its own delete
                        continue
                    await self._forget_memory(session.session_id)

    async def _forget_memory(self, session_id: str) -> None:
        """Delete what lives beside the session: its own vector store (its turns' large documents), if it has
        one, whatever the session-deletion callbacks hold (the code interpreter's kernel and files), and its
        lineage if it is a fork."""
        await self._forks.forget(session_id)
        if self._memory is not None:
            await self._memory.forget(session_id)
        for callback in self.deleted:
            await callback(session_id)


def _session(record: SessionRecord, turns: list[Turn]) -> Session:
    return Session(
        session_id=record.session_id, session_name=record.session_name, turns=turns, started_at=record.started_at
    )
