"""The Agents API's operations over storage and the turn engine.

The service holds the agents (and the configs its turns keep of them) itself; sessions
(``agent_sessions.py``), starting and resuming turns (``turn_starts.py``), their runs and
webhooks (``turn_runs.py``), reading them (``turn_reads.py``) and the turns a dead replica
left (``turn_recovery.py``) are its collaborators'.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ferryman.api.agents import (
    Agent,
    AgentConfig,
    CreateTurnRequest,
    ResumeTurnRequest,
    Session,
    Step,
    Turn,
)
from ferryman.auth.policy import AccessPolicy
from ferryman.auth.principal import Principal, current_principal
from ferryman.coordination.base import RecordDeleted
from ferryman.engine.plan import TurnOverrides, build_plan
from ferryman.errors import InvalidRequestError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.inference.router import ModelRouter
from ferryman.safe_fetch import FetchPolicy
from ferryman.safety.base import ShieldRegistry
from ferryman.storage.base import Page, StoredEvent
from ferryman.storage.domain.forks import Lineages
from ferryman.storage.domain.records import Stored
from ferryman.tools.registry import ToolRegistry

from .access import Access
from .agent_memory import AgentMemory
from .agent_records import AgentRecords
from .agent_sessions import AgentSessions
from .approval_holds import ApprovalHolds
from .fork_reads import ForkReads
from .forks import SessionForks
from .host import TurnHost
from .idempotency import Claim, CreatedRecord, settlement, stored_record
from .session_memory import SessionMemory
from .session_reads import SessionReads
from .turn_plans import TurnInputs
from .turn_reads import TurnReads
from .turn_recovery import TurnRecovery
from .turn_runs import LiveTurn, TurnRuns
from .turn_starts import RUN_END_WAIT_SECONDS, TurnStarts

__all__ = ["INLINE_DOCUMENT_TOKENS", "RUN_END_WAIT_SECONDS", "AgentService", "LiveTurn"]

_AGENT_CACHE_SIZE = 4096
INLINE_DOCUMENT_TOKENS = 2000
"""Documents of a turn up to this many tokens (together) go into the prompt whole; larger ones are retrieved from."""


class AgentService:
    """Agents, sessions and turns.

    Args:
        host: Storage, the turn engine, the runner, leases and the fan-out (shared with the Responses API).
        models: The model router, to check an agent's model exists.
        tools: Server-side toolgroups.
        shields: Registered shields.
        fetch: What a turn's document URLs may reach.
        memory: Indexes a turn's documents too large to inline in its session's vector store (None: all inline).
        inline_document_tokens: The documents' size in tokens (``knowledge.chunking.count_tokens``) above which
            they are retrieved from.
        blocks: The agents' memory blocks, shown in each turn's system message and deleted with their agent
            (None: agents have no memory).
        holds: The approval inbox, told of the calls turns hold and of those a resume answers (None: no inbox).
        access: Who may do what to agents (default: each caller acts on what it owns); sessions and turns are
            checked by the records' guard (``services.record_guard``).
    """

    def __init__(
        self,
        host: TurnHost,
        models: ModelRouter,
        tools: ToolRegistry,
        shields: ShieldRegistry,
        fetch: FetchPolicy | None = None,
        memory: SessionMemory | None = None,
        inline_document_tokens: int = INLINE_DOCUMENT_TOKENS,
        blocks: AgentMemory | None = None,
        holds: ApprovalHolds | None = None,
        access: Access | None = None,
    ) -> None:
        self._host = host
        self._store = host.store
        self._fanout = host.fanout
        self._models = models
        self._tools = tools
        self._shields = shields
        self._blocks = blocks
        access = access or Access(AccessPolicy())
        reads = ForkReads(self._store, Lineages(self._store.kernel))
        sessions = SessionReads(self._store.kernel, access)
        forks = SessionForks(self._store, host.guard, reads, host.leases.until, sessions, holds)
        self.agents = AgentRecords(self._store.kernel, access, keyed=self._store)
        # Agents never change once created, so turns use kept configs (with their owners, checked against each
        # caller); this saves a database round trip on every turn. A delete drops the entry on every replica
        # (RecordDeleted); reading an agent always asks the store, so a delete elsewhere is seen at once.
        self._agents: dict[str, Stored[Agent]] = {}
        self._sessions = AgentSessions(host, self.agents, sessions, reads, forks, memory)
        self._turns = TurnReads(host, reads, sessions)
        runs = TurnRuns(host, holds, self._turns)
        inputs = TurnInputs(models, tools, shields, fetch or FetchPolicy(), memory, inline_document_tokens, blocks)
        self._starts = TurnStarts(host, inputs, holds, self._agent, reads, self._turns, runs)
        recovery = TurnRecovery(host, runs)
        host.on_abandoned(lambda turn: turn.response_id is None, recovery.close_abandoned)
        if (webhooks := host.webhooks) is not None:
            webhooks.recoverers["turn"] = recovery.recover_end
            self._sessions.deleted.append(lambda session_id: webhooks.forget(session_id=session_id))

    # ---- agents ----------------------------------------------------------

    async def create_agent(self, config: AgentConfig, key: Claim | None = None) -> str:
        """Validate and store an agent, with ``key`` (its request's idempotency key, claimed by the write that
        stores it: see :class:`CreatedRecord`); return its id.

        Raises:
            IdempotencyKeyHeldError: an earlier call with the key holds it (nothing is stored).
        """
        try:
            await self._models.route(config.model)
        except NotFoundError as exc:
            raise InvalidRequestError(exc.message, "agent_config.model") from exc
        await build_plan(config, TurnOverrides(), self._tools, self._shields, offline=True)
        agent = Agent(agent_id=new_id(), agent_config=config, created_at=utcnow())
        await self.agents.create(
            current_principal.get(), agent, settlement(key, CreatedRecord("agent", agent.agent_id))
        )
        stored_record(key)
        return agent.agent_id

    async def get_agent(self, agent_id: str) -> Agent:
        """One agent, as stored now."""
        return await self.agents.get(current_principal.get(), agent_id)

    async def _agent(self, agent_id: str, who: Principal | None) -> Agent:
        """One agent ``who`` may read, kept for the turns that follow (a kept one is checked for each caller)."""
        found = self._agents.get(agent_id)
        if found is None:
            found = await self.agents.stored(who, agent_id)
            if len(self._agents) >= _AGENT_CACHE_SIZE:
                self._agents.pop(next(iter(self._agents)))
            self._agents[agent_id] = found
        else:
            self.agents.allow(who, found)
        return found.value

    async def list_agents(self, start_index: int, limit: int | None) -> Page[Agent]:
        """The agents the caller may read, in creation order."""
        return await self.agents.page(current_principal.get(), start_index, limit)

    async def delete_agent(self, agent_id: str) -> None:
        """Delete an agent with everything under it, cancelling its running turns first.

        Its sessions (and what is under them) are deleted first, as the server: deleting the agent was
        allowed, whoever opened them. Those opened meanwhile, after the first listing, go after the agent.
        """
        who = current_principal.get()
        await self.agents.stored(who, agent_id, "delete")  # before stopping its turns
        self.forget(agent_id)
        await self._cancel(agent_id, "the agent was deleted")
        await self._sessions.delete_all(agent_id)
        if not await self.agents.delete(who, agent_id):
            raise NotFoundError(f"agent '{agent_id}' not found")
        self.forget(agent_id)  # a read since the first forget may have cached it again
        await self._sessions.delete_all(agent_id)  # any opened while the first were deleted: none can be now
        if self._blocks is not None:
            await self._blocks.forget(agent_id)
        await self._fanout.notify(RecordDeleted(agent_id, "agent"))

    def on_session_deleted(self, callback: Callable[[str], Awaitable[None]]) -> None:
        """Have ``callback(session_id)`` run after a session is deleted (with its agent or alone)."""
        self._sessions.deleted.append(callback)

    def forget(self, agent_id: str | None) -> None:
        """Drop what this replica kept of a deleted agent (None: of every agent)."""
        if agent_id is None:
            self._agents.clear()
        else:
            self._agents.pop(agent_id, None)

    async def _cancel(self, owner: str, reason: str) -> None:
        await self._host.cancel_everywhere(owner, reason)

    # ---- sessions (``agent_sessions.py``) ---------------------------------

    async def create_session(self, agent_id: str, session_name: str, key: Claim | None = None) -> str:
        """Open a session of an agent (which the caller may read), with ``key`` (its request's idempotency key,
        claimed by the write that stores it); return its id."""
        return await self._sessions.create_session(agent_id, session_name, key)

    async def get_session(self, agent_id: str, session_id: str, turn_ids: list[str] | None) -> Session:
        """A session with its turns (only those named, if ``turn_ids`` is given): a fork's shared ones first."""
        return await self._sessions.get_session(agent_id, session_id, turn_ids)

    async def list_sessions(self, agent_id: str, start_index: int, limit: int | None) -> Page[Session]:
        """An agent's sessions with their turns, in creation order."""
        return await self._sessions.list_sessions(agent_id, start_index, limit)

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session with its turns, cancelling its running turn first; what forks share of it is first
        given to a holder (``forks.py``)."""
        await self._sessions.delete_session(agent_id, session_id)

    async def fork_session(
        self, agent_id: str, session_id: str, turn_id: str, session_name: str | None, key: Claim | None = None
    ) -> str:
        """A new session sharing the session's history up to and including ``turn_id``, with ``key`` (its
        request's idempotency key, claimed by the write that stores it); its id (see ``forks.py``)."""
        return await self._sessions.fork_session(agent_id, session_id, turn_id, session_name, key)

    # ---- turns (``turn_starts.py``, ``turn_reads.py``) ----------------------

    async def start_turn(
        self,
        agent_id: str,
        session_id: str,
        request: CreateTurnRequest,
        provider_data: dict[str, Any] | None = None,
        replayed_by: Claim | None = None,
    ) -> LiveTurn:
        """Store a new turn and run it in the background.

        ``provider_data`` (per-request provider settings such as API keys) is
        kept in memory for this run only, never stored. ``replayed_by``: the request's
        idempotency key, which is to replay this run; it is stored with the turn.

        Raises:
            ContextLengthExceededError: the instructions, history, input and tools are longer than the
                model's context (less the answer's room); nothing is stored.
        """
        return await self._starts.start_turn(agent_id, session_id, request, provider_data, replayed_by)

    async def resume_turn(
        self,
        agent_id: str,
        session_id: str,
        turn_id: str,
        request: ResumeTurnRequest,
        provider_data: dict[str, Any] | None = None,
        continued: bool = False,
        replayed_by: Claim | None = None,
    ) -> LiveTurn:
        """Continue a turn that awaits client tool results or decisions on its approval requests.

        ``replayed_by``: the request's idempotency key, which is to replay this run; it is stored as the run
        starts.

        ``continued``: the server continues the run itself (the approval inbox), with the webhook of the run
        that paused, checked when that run's request named it (and again at every attempt). It reads the agent
        as the server: the inbox checked that the decider may update the session, and the run goes on with
        what its caller may read now (memory blocks, sessions), whether or not that still includes the agent.
        """
        return await self._starts.resume_turn(
            agent_id, session_id, turn_id, request, provider_data, continued, replayed_by
        )

    async def turn_events(self, agent_id: str, session_id: str, turn_id: str, after: int) -> AsyncIterator[StoredEvent]:
        """A turn's events numbered above ``after``: stored ones, then live ones until it ends (a turn a fork
        shares has ended: its events are its original's, read as the server)."""
        return await self._turns.turn_events(agent_id, session_id, turn_id, after)

    async def get_turn(self, agent_id: str, session_id: str, turn_id: str) -> Turn:
        """One turn with its completed steps (of a fork: its own, or one it shares, as its source holds it)."""
        return await self._turns.get_turn(agent_id, session_id, turn_id)

    async def get_step(self, agent_id: str, session_id: str, turn_id: str, step_id: str) -> Step:
        """One step of a turn (of a fork: of its own turn, or of one it shares)."""
        return await self._turns.get_step(agent_id, session_id, turn_id, step_id)
