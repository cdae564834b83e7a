"""The Agents API's operations over storage and the turn engine."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ferryman.api.agents import (
    Agent,
    AgentConfig,
    CreateTurnRequest,
    ResumeTurnRequest,
    Session,
    Step,
    ToolExecutionStep,
    Turn,
)
from ferryman.api.content import TurnInputMessage, UserMessage
from ferryman.coordination.base import RecordDeleted
from ferryman.engine.channel import LiveRun
from ferryman.engine.events import Emit, TurnFailed
from ferryman.engine.memory import MemoryDocument
from ferryman.engine.plan import TurnOverrides, TurnPlan, build_plan
from ferryman.engine.resume import complete_pending_step
from ferryman.engine.state import TurnState
from ferryman.engine.tracing import ended_if_refused, paused_span, start_turn_span
from ferryman.errors import ConflictError, FailureCode, FerrymanError, InvalidRequestError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.inference.context import check_context
from ferryman.inference.router import ModelRouter
from ferryman.knowledge.chunking import count_tokens
from ferryman.safe_fetch import FetchPolicy
from ferryman.safety.base import ShieldRegistry
from ferryman.storage.base import ExpiredTurn, Page, SessionRecord, StoredEvent, TurnRecord
from ferryman.storage.owned import authorize
from ferryman.tools.registry import ToolRegistry

from .documents import attach_documents, document_texts
from .host import TurnHost
from .leases import ABANDONED
from .run_metrics import RunMetrics
from .session_memory import SessionMemory
from .turn_stream import turn_event_data
from .usage import RunUsage

log = logging.getLogger(__name__)


LiveTurn = LiveRun[None]
"""A turn running in the background: its events, and its task, whose result is the turn."""

_AGENT_CACHE_SIZE = 4096
RUN_END_WAIT_SECONDS = 5.0
"""How long a resume waits for another replica to finish recording the run that paused."""
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
    ) -> None:
        self._host = host
        self._store = host.store
        self._leases = host.leases
        self._fanout = host.fanout
        self._engine = host.engine
        self._runner = host.runner
        self._models = models
        self._tools = tools
        self._shields = shields
        self._fetch = fetch or FetchPolicy()
        self._memory = memory
        self._inline_document_tokens = inline_document_tokens
        # Agents never change once created, so turns use kept configs; this saves a database
        # round trip on every turn. A delete drops the entry on every replica (RecordDeleted);
        # reading an agent always asks the store, so a delete elsewhere is seen at once.
        self._agents: dict[str, Agent] = {}
        self._session_deleted: list[Callable[[str], Awaitable[None]]] = []
        host.on_abandoned(lambda turn: turn.response_id is None, self._close_abandoned)

    # ---- agents ----------------------------------------------------------

    async def create_agent(self, config: AgentConfig) -> str:
        """Validate and store an agent; return its id."""
        try:
            await self._models.route(config.model)
        except NotFoundError as exc:
            raise InvalidRequestError(exc.message, "agent_config.model") from exc
        await build_plan(config, TurnOverrides(), self._tools, self._shields, offline=True)
        agent = Agent(agent_id=new_id(), agent_config=config, created_at=utcnow())
        await self._store.create_agent(agent)
        return agent.agent_id

    async def get_agent(self, agent_id: str) -> Agent:
        """One agent, as stored now."""
        return await self._store.get_agent(agent_id)

    async def _agent(self, agent_id: str) -> Agent:
        """One agent, kept for the turns that follow."""
        agent = self._agents.get(agent_id)
        if agent is None:
            agent = await self._store.get_agent(agent_id)
            if len(self._agents) >= _AGENT_CACHE_SIZE:
                self._agents.pop(next(iter(self._agents)))
            self._agents[agent_id] = agent
        return agent

    async def list_agents(self, start_index: int, limit: int | None) -> Page[Agent]:
        """Agents in creation order."""
        return await self._store.list_agents(start_index, limit)

    async def delete_agent(self, agent_id: str) -> None:
        """Delete an agent with everything under it, cancelling its running turns first."""
        await self._store.get_agent(agent_id)
        await authorize(self._store, "delete", "agent", agent_id)  # before stopping its turns
        self.forget(agent_id)
        await self._cancel(agent_id, "the agent was deleted")
        keeps = self._memory is not None or self._session_deleted
        sessions = (await self._store.list_sessions(agent_id, 0, None)).items if keeps else []
        await self._store.delete_agent(agent_id)
        for session in sessions:
            await self._forget_memory(session.session_id)
        await self._fanout.notify(RecordDeleted(agent_id, "agent"))

    def on_session_deleted(self, callback: Callable[[str], Awaitable[None]]) -> None:
        """Have ``callback(session_id)`` run after a session is deleted (with its agent or alone)."""
        self._session_deleted.append(callback)

    def forget(self, agent_id: str | None) -> None:
        """Drop what this replica kept of a deleted agent (None: of every agent)."""
        if agent_id is None:
            self._agents.clear()
        else:
            self._agents.pop(agent_id, None)

    async def _cancel(self, owner: str, reason: str) -> None:
        await self._host.cancel_everywhere(owner, reason)

    # ---- sessions --------------------------------------------------------

    async def create_session(self, agent_id: str, session_name: str) -> str:
        """Open a session of an agent; return its id."""
        await self._store.get_agent(agent_id)
        session = SessionRecord(new_id(), agent_id, session_name, utcnow())
        await self._store.create_session(session)
        return session.session_id

    async def get_session(self, agent_id: str, session_id: str, turn_ids: list[str] | None) -> Session:
        """A session with its turns (only those named, if ``turn_ids`` is given)."""
        record = await self._store.get_session(agent_id, session_id)
        turns = await self._store.list_turns([session_id], turn_ids)
        return _session(record, turns)

    async def list_sessions(self, agent_id: str, start_index: int, limit: int | None) -> Page[Session]:
        """An agent's sessions with their turns, in creation order."""
        await self._store.get_agent(agent_id)
        page = await self._store.list_sessions(agent_id, start_index, limit)
        turns = await self._store.list_turns([s.session_id for s in page.items])
        by_session: dict[str, list[Turn]] = {}
        for turn in turns:
            by_session.setdefault(turn.session_id, []).append(turn)
        sessions = [_session(s, by_session.get(s.session_id, [])) for s in page.items]
        return Page(sessions, page.has_more)

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session with its turns, cancelling its running turn first."""
        await self._store.get_session(agent_id, session_id)
        await authorize(self._store, "delete", "session", session_id)  # before stopping its turn
        await self._cancel(session_id, "the session was deleted")
        await self._store.delete_session(agent_id, session_id)
        await self._forget_memory(session_id)

    async def _forget_memory(self, session_id: str) -> None:
        """Delete what lives beside the session: its own vector store (its turns' large documents), if it has
        one, and whatever the session-deletion callbacks hold (the code interpreter's kernel and files)."""
        if self._memory is not None:
            await self._memory.forget(session_id)
        for callback in self._session_deleted:
            await callback(session_id)

    # ---- turns -----------------------------------------------------------

    async def start_turn(
        self,
        agent_id: str,
        session_id: str,
        request: CreateTurnRequest,
        provider_data: dict[str, Any] | None = None,
    ) -> LiveTurn:
        """Store a new turn and run it in the background.

        ``provider_data`` (per-request provider settings such as API keys) is
        kept in memory for this run only, never stored.

        Raises:
            ContextLengthExceededError: the instructions, history, input and tools are longer than the
                model's context (less the answer's room); nothing is stored.
        """
        agent = await self._agent(agent_id)
        overrides = TurnOverrides(list(request.toolgroups or []), request.tool_config)
        plan = await build_plan(agent.agent_config, overrides, self._tools, self._shields, provider_data)
        if request.documents:  # fetch nothing for a session that does not exist
            await self._store.get_session(agent_id, session_id)
        history_inputs, memorized = await self._documents(request)
        turn_id = new_id()
        await self._check_context(plan, session_id, turn_id, history_inputs)
        record = TurnRecord(
            turn_id=turn_id,
            session_id=session_id,
            agent_id=agent_id,
            status="in_progress",
            input_messages=list(request.messages),
            started_at=utcnow(),
            overrides=overrides.to_json(),
            lease_until=self._leases.until(),
        )
        span = start_turn_span(record, "agents", session_id, agent_name=agent.agent_config.name)
        with ended_if_refused(span):
            async with self._host.admitting(record.turn_id):
                history = await self._store.start_turn(record, list(history_inputs))
                state = TurnState(record, plan, history, documents=memorized, span=span)
                return self._launch(
                    record, 0, lambda emit: self._engine.run(state, emit), metered=_metered(record, plan, 0)
                )

    async def _check_context(
        self, plan: TurnPlan, session_id: str, turn_id: str, inputs: list[TurnInputMessage]
    ) -> None:
        """Refuse a turn whose first prompt cannot fit its model's context, before anything is stored.

        The session's history is read for it only when the model's context size is known.
        """
        if self._models.context_window(plan.model) is None:
            return
        earlier = await self._store.load_history(session_id, turn_id)
        await check_context(self._models, plan.chat_request([*earlier, *inputs]))

    async def _documents(self, request: CreateTurnRequest) -> tuple[list[TurnInputMessage], list[MemoryDocument]]:
        """The turn's input messages, with its documents inlined, or the documents to retrieve from if too large."""
        messages, documents = list(request.messages), list(request.documents or [])
        if not documents:
            return messages, []
        if not any(isinstance(m, UserMessage) for m in messages):  # before fetching anything for nothing
            raise InvalidRequestError("documents need a user message to attach to", "documents")
        texts = await document_texts(documents, self._fetch)
        if self._memory is None or await _fit(texts, self._inline_document_tokens):
            return attach_documents(messages, documents, texts), []
        memorized = [
            MemoryDocument(new_id(), text, {"mime_type": document.mime_type})
            for document, text in zip(documents, texts, strict=True)
        ]
        return messages, memorized

    async def resume_turn(
        self,
        agent_id: str,
        session_id: str,
        turn_id: str,
        request: ResumeTurnRequest,
        provider_data: dict[str, Any] | None = None,
    ) -> LiveTurn:
        """Continue a turn that awaits client tool results or decisions on its approval requests."""
        if not request.tool_responses and not request.approvals:
            raise InvalidRequestError("a resume needs tool_responses, approvals, or both", "tool_responses")
        agent = await self._agent(agent_id)
        await self._store.get_session(agent_id, session_id)
        record = await self._store.get_turn_record(session_id, turn_id)
        if record.status != "awaiting_input":
            raise ConflictError(f"turn '{turn_id}' is not awaiting input (status: {record.status})")
        await self._previous_run_recorded(turn_id)
        pending = await self._store.pending_step(turn_id)
        answer = complete_pending_step(pending, list(request.tool_responses), list(request.approvals))
        overrides = TurnOverrides.from_json(record.overrides)
        plan = await build_plan(agent.agent_config, overrides, self._tools, self._shields, provider_data)
        async with self._host.admitting(turn_id):
            record = await self._store.claim_resume(session_id, turn_id, self._leases.until())
            history = await self._store.load_history(session_id, turn_id)
            done = await self._store.list_turns([session_id], [turn_id])
            span = start_turn_span(
                record, "agents", session_id, agent_name=agent.agent_config.name, resumes=paused_span(record.overrides)
            )
            with ended_if_refused(span):
                state = TurnState(record, plan, history, steps=list(done[0].steps) if done else [], span=span)
                first_seq = await self._store.turn_event_count(turn_id)
                counted = RunMetrics("agents", decided=len(answer.ruling.approved) + len(answer.ruling.denied))
                metered = _metered(record, plan, first_seq)
                return self._launch(
                    record, first_seq, lambda emit: self._engine.resume(state, answer, emit), counted, metered
                )

    async def _previous_run_recorded(self, turn_id: str) -> None:
        """Wait until the run that paused the turn has stored its events.

        The pause is stored, and announced, a moment before that run's events are:
        a client that resumes at once must not get event numbers that run used.
        """
        task = self._runner.task(turn_id)
        if task is not None:
            await asyncio.wait([task])  # its outcome is its own; a cancelled resume leaves it be
        else:
            with contextlib.suppress(TimeoutError):  # a replica that died mid-record: go on with what is stored
                async with asyncio.timeout(RUN_END_WAIT_SECONDS):
                    await self._fanout.wait_run_end(_stream(turn_id))

    def _launch(
        self,
        record: TurnRecord,
        first_seq: int,
        run: Callable[[Emit], Awaitable[Turn]],
        counted: RunMetrics | None = None,
        metered: RunUsage | None = None,
    ) -> LiveTurn:
        turn_id = record.turn_id

        async def settle(events: list[str]) -> None:
            try:
                await self._store.save_turn_events(turn_id, first_seq, events)
            except FerrymanError as exc:
                log.warning("events of turn %s not stored: %s", turn_id, exc.message)

        owners = (record.agent_id or "", record.session_id)
        counted = counted or RunMetrics("agents")
        return self._host.launch(
            turn_id, _stream(turn_id), run, turn_event_data, settle, owners, first_seq, counted=counted, metered=metered
        )

    async def turn_events(self, agent_id: str, session_id: str, turn_id: str, after: int) -> AsyncIterator[StoredEvent]:
        """A turn's events numbered above ``after``: stored ones, then live ones until it ends."""
        await self._store.get_session(agent_id, session_id)
        await self._store.get_turn_record(session_id, turn_id)

        async def stored_after(last: int) -> list[StoredEvent]:
            return await self._store.turn_events_after(turn_id, last)

        async def is_running() -> bool:
            try:
                return (await self._store.get_turn_record(session_id, turn_id)).status == "in_progress"
            except NotFoundError:  # deleted while followed: its stream just ends
                return False

        return await self._host.events(_stream(turn_id), after, stored_after, is_running)

    async def _close_abandoned(self, turn: ExpiredTurn) -> None:
        """Store what a dead replica streamed of a turn, and end the stream with the turn's failure."""
        turn_id = turn.turn_id
        stored = await self._store.turn_event_count(turn_id)

        def failure(seq: int) -> list[str]:
            return turn_event_data(TurnFailed(turn_id, FailureCode.INTERRUPTED, ABANDONED), seq)

        async def save(events: list[str]) -> None:
            await self._store.save_turn_events(turn_id, stored, events)

        await self._host.close_abandoned(_stream(turn_id), stored, failure, save)

    async def get_turn(self, agent_id: str, session_id: str, turn_id: str) -> Turn:
        """One turn with its completed steps."""
        await self._store.get_session(agent_id, session_id)
        turns = await self._store.list_turns([session_id], [turn_id])
        if not turns:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        turn = turns[0]
        if turn.status == "awaiting_input":
            pending = await self._store.pending_step(turn_id)
            if isinstance(pending, ToolExecutionStep) and pending.approval_requests:
                return turn.model_copy(update={"approval_requests": pending.approval_requests})
        return turn

    async def get_step(self, agent_id: str, session_id: str, turn_id: str, step_id: str) -> Step:
        """One step of a turn."""
        await self._store.get_session(agent_id, session_id)
        return await self._store.get_step(session_id, turn_id, step_id)


def _stream(turn_id: str) -> str:
    return f"turn:{turn_id}"


def _metered(record: TurnRecord, plan: TurnPlan, first_seq: int) -> RunUsage:
    """What counts the usage of a run of the turn (its first, or a resume's from event ``first_seq``)."""
    return RunUsage("agents", record.turn_id, first_seq, plan.model, record.agent_id, record.session_id)


def _session(record: SessionRecord, turns: list[Turn]) -> Session:
    return Session(
        session_id=record.session_id, session_name=record.session_name, turns=turns, started_at=record.started_at
    )


async def _fit(texts: list[str], limit: int) -> bool:
    """Whether the texts hold at most ``limit`` tokens together (counted off the event loop: they can be long)."""
    if sum(len(text) for text in texts) <= limit:  # every token spans a character at least
        return True
    counted = await asyncio.to_thread(lambda: sum(count_tokens(text) for text in texts))
    return counted <= limit
