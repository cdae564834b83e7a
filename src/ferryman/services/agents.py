"""The Agents API's operations over storage and the turn engine."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from opentelemetry.trace import Span

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
from ferryman.api.content import Message, TurnInputMessage, UserMessage
from ferryman.auth.policy import AccessPolicy
from ferryman.auth.principal import Principal, acting_as, current_principal
from ferryman.coordination.base import RecordDeleted
from ferryman.engine.channel import LiveRun
from ferryman.engine.context_fit import minimal_fit
from ferryman.engine.events import Emit, EngineEvent, TurnAwaitingInput, TurnFailed
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
from ferryman.storage.base import ExpiredTurn, Page, SessionRecord, StoredEvent, TurnRecord, turn_from_record
from ferryman.storage.domain.forks import Lineages
from ferryman.storage.domain.records import Stored
from ferryman.storage.owned import authorize
from ferryman.tools.memory import TOOL_NAME
from ferryman.tools.registry import ToolRegistry
from ferryman.webhooks.outbox import ArmedRun

from .access import Access
from .agent_memory import AgentMemory
from .agent_records import AgentRecords
from .approval_holds import ApprovalHolds
from .documents import attach_documents, document_texts
from .fork_reads import ForkReads
from .forks import SessionForks
from .host import TurnHost
from .leases import ABANDONED
from .run_metrics import RunMetrics
from .session_memory import SessionMemory
from .turn_queue import TurnQueue
from .turn_stream import turn_event_data
from .usage import RunUsage
from .webhooks import TURN_EVENTS, KeptWebhook, keep_webhook, kept_webhook

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
        blocks: The agents' memory blocks, shown in each turn's system message and deleted with their agent
            (None: agents have no memory).
        holds: The approval inbox, told of the calls turns hold and of those a resume answers (None: no inbox).
        access: Who may do what to agents (default: each caller acts on what it owns); sessions and turns are
            still checked by the store (``storage.owned``).
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
        self._blocks = blocks
        self._holds = holds
        self._reads = ForkReads(self._store, Lineages(self._store.kernel))
        self._forks = SessionForks(self._store, self._reads, self._leases.until, holds)
        self.agents = AgentRecords(self._store.kernel, access or Access(AccessPolicy()))
        # Agents never change once created, so turns use kept configs (with their owners, checked against each
        # caller); this saves a database round trip on every turn. A delete drops the entry on every replica
        # (RecordDeleted); reading an agent always asks the store, so a delete elsewhere is seen at once.
        self._agents: dict[str, Stored[Agent]] = {}
        self._session_deleted: list[Callable[[str], Awaitable[None]]] = []
        self._queue = TurnQueue(
            self._store, self._runner, self._fanout, _stream_named, host.cancel_everywhere, host.rollback_wait_seconds
        )
        host.on_abandoned(lambda turn: turn.response_id is None, self._close_abandoned)
        if (webhooks := host.webhooks) is not None:
            webhooks.recoverers["turn"] = self._recover_end
            self._session_deleted.append(lambda session_id: webhooks.forget(session_id=session_id))

    # ---- agents ----------------------------------------------------------

    async def create_agent(self, config: AgentConfig) -> str:
        """Validate and store an agent; return its id."""
        try:
            await self._models.route(config.model)
        except NotFoundError as exc:
            raise InvalidRequestError(exc.message, "agent_config.model") from exc
        await build_plan(config, TurnOverrides(), self._tools, self._shields, offline=True)
        agent = Agent(agent_id=new_id(), agent_config=config, created_at=utcnow())
        await self.agents.create(current_principal.get(), agent)
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
        await self._delete_sessions(agent_id)
        if not await self.agents.delete(who, agent_id):
            raise NotFoundError(f"agent '{agent_id}' not found")
        self.forget(agent_id)  # a read since the first forget may have cached it again
        await self._delete_sessions(agent_id)  # any opened while the first were deleted: none can be now
        if self._blocks is not None:
            await self._blocks.forget(agent_id)
        await self._fanout.notify(RecordDeleted(agent_id, "agent"))

    async def _delete_sessions(self, agent_id: str) -> None:
        """Delete every session of an agent with its turns, and what lives beside each (as the server)."""
        with acting_as(None):
            sessions = (await self._store.list_sessions(agent_id, 0, None)).items
            for session in sessions:
                try:
                    await self._store.delete_session(agent_id, session.session_id)
                except NotFoundError:  # deleted meanwhile by its own delete
                    continue
                await self._forget_memory(session.session_id)

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
        """Open a session of an agent (which the caller may read); return its id."""
        await self.agents.get(current_principal.get(), agent_id)
        session = SessionRecord(new_id(), agent_id, session_name, utcnow())
        await self._store.create_session(session)
        await self._agent_kept(agent_id, session.session_id)
        return session.session_id

    async def _agent_kept(self, agent_id: str, session_id: str) -> None:
        """Undo a session opened as its agent was deleted, and say the agent is missing.

        The agent is read again once the session is stored: an agent delete that ran between the first read
        and the write listed the agent's sessions before this one existed, and no key in storage refuses it.
        A delete that has not yet removed the record lists its sessions again after it (``delete_agent``).
        """
        try:
            await self.agents.get(None, agent_id)
        except NotFoundError:
            with acting_as(None), contextlib.suppress(NotFoundError):
                await self._store.delete_session(agent_id, session_id)
                await self._forget_memory(session_id)
            raise

    async def get_session(self, agent_id: str, session_id: str, turn_ids: list[str] | None) -> Session:
        """A session with its turns (only those named, if ``turn_ids`` is given): a fork's shared ones first."""
        record = await self._store.get_session(agent_id, session_id)
        shared = await self._reads.inherited_turns(session_id)
        if turn_ids is not None:
            shared = [turn for turn in shared if turn.turn_id in turn_ids]
        turns = await self._store.list_turns([session_id], turn_ids)
        return _session(record, [*shared, *turns])

    async def list_sessions(self, agent_id: str, start_index: int, limit: int | None) -> Page[Session]:
        """An agent's sessions with their turns, in creation order."""
        await self.agents.get(current_principal.get(), agent_id)
        page = await self._store.list_sessions(agent_id, start_index, limit)
        turns = await self._store.list_turns([s.session_id for s in page.items])
        by_session = await self._reads.inherited_of([s.session_id for s in page.items])
        for turn in turns:
            by_session.setdefault(turn.session_id, []).append(turn)
        sessions = [_session(s, by_session.get(s.session_id, [])) for s in page.items]
        return Page(sessions, page.has_more)

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session with its turns, cancelling its running turn first; what forks share of it is first
        given to a holder (``forks.py``)."""
        await self._store.get_session(agent_id, session_id)
        await authorize(self._store, "delete", "session", session_id)  # before stopping its turn
        await self._cancel(session_id, "the session was deleted")
        async with self._forks.detached(session_id):
            await self._store.delete_session(agent_id, session_id)
        await self._forget_memory(session_id)

    async def fork_session(self, agent_id: str, session_id: str, turn_id: str, session_name: str | None) -> str:
        """A new session sharing the session's history up to and including ``turn_id``; its id (see ``forks.py``)."""
        await self.agents.get(current_principal.get(), agent_id)
        forked = await self._forks.fork_session(agent_id, session_id, turn_id, session_name)
        await self._agent_kept(agent_id, forked)
        return forked

    async def _forget_memory(self, session_id: str) -> None:
        """Delete what lives beside the session: its own vector store (its turns' large documents), if it has
        one, whatever the session-deletion callbacks hold (the code interpreter's kernel and files), and its
        lineage if it is a fork."""
        await self._forks.forget(session_id)
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
        agent = await self._agent(agent_id, current_principal.get())
        await self._host.check_webhook(request.webhook)
        overrides = TurnOverrides(list(request.toolgroups or []), request.tool_config)
        plan = await self._remembering(
            agent_id, await build_plan(agent.agent_config, overrides, self._tools, self._shields, provider_data)
        )
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
            overrides=keep_webhook(overrides.to_json(), request.webhook, _run_key(turn_id, 0)),
            lease_until=self._leases.until(),
        )
        span = start_turn_span(record, "agents", session_id, agent_name=agent.agent_config.name)
        with ended_if_refused(span):
            async with self._host.admitting(record.turn_id):
                if request.multitask_strategy != "reject":
                    return await self._enqueue(record, plan, history_inputs, memorized, span, request)
                shared = await self._reads.inherited_history(session_id)  # ended turns only: never changes
                history = [*shared, *await self._store.start_turn(record, list(history_inputs))]
                state = TurnState(record, plan, history, documents=memorized, span=span)
                return self._launch(
                    record,
                    0,
                    lambda emit: self._engine.run(state, emit),
                    metered=_metered(record, plan, 0),
                    webhook=request.webhook,
                )

    async def _enqueue(
        self,
        record: TurnRecord,
        plan: TurnPlan,
        inputs: list[TurnInputMessage],
        documents: list[MemoryDocument],
        span: Span,
        request: CreateTurnRequest,
    ) -> LiveTurn:
        """Store the turn ``queued`` and launch a run that starts it in its place in the queue (``turn_queue.py``);
        ``interrupt`` first cancels the session's running turn, ``rollback`` cancels and deletes it. Once it
        starts, it reads its history and the agent's memory blocks as they are then."""
        strategy = request.multitask_strategy
        await self._queue.check(record.session_id, strategy)
        record.status = "queued"
        await self._store.start_turn(record, list(inputs), load_history=False)
        ready: list[TurnState] = []

        async def started() -> None:
            history = await self._history(record.session_id, record.turn_id)
            now = await self._remembering(record.agent_id or "", plan)
            ready.append(TurnState(record, now, history, documents=documents, span=span))

        async def run(emit: Emit) -> Turn:
            if not await self._queue.take_turn(record, strategy, span, emit, self._leases.until, started):
                return turn_from_record(record, [])
            return await self._engine.run(ready[0], emit)

        return self._launch(record, 0, run, metered=_metered(record, plan, 0), webhook=request.webhook)

    async def _remembering(self, agent_id: str, plan: TurnPlan) -> TurnPlan:
        """The plan with the agent's memory blocks, as they are now, in its system message."""
        if self._blocks is None:
            return plan
        memory = await self._blocks.prompt(
            current_principal.get(), agent_id, plan.model, TOOL_NAME in plan.server_tools
        )
        return dataclasses.replace(plan, memory=memory)

    async def _check_context(
        self, plan: TurnPlan, session_id: str, turn_id: str, inputs: list[TurnInputMessage]
    ) -> None:
        """Refuse a turn whose first prompt cannot fit its model's context, before anything is stored.

        With the agent's ``truncation`` or ``compaction`` (``context_fit.py``) only the instructions, tools and
        the turn's input must fit; with ``disabled``, the whole history too. The session's history is read
        for it only when the model's context size is known.
        """
        if self._models.context_window(plan.model) is None:
            return
        if plan.context.strategy != "disabled":
            await minimal_fit(self._models, plan.chat_request, list(inputs))
            return
        earlier = await self._history(session_id, turn_id)
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
        continued: bool = False,
    ) -> LiveTurn:
        """Continue a turn that awaits client tool results or decisions on its approval requests.

        ``continued``: the server continues the run itself (the approval inbox), with the webhook of the run
        that paused, checked when that run's request named it (and again at every attempt). It reads the agent
        as the server: the inbox checked that the decider may update the session, and the run goes on with
        what its caller may read now (memory blocks, sessions), whether or not that still includes the agent.
        """
        if not request.tool_responses and not request.approvals:
            raise InvalidRequestError("a resume needs tool_responses, approvals, or both", "tool_responses")
        agent = await self._agent(agent_id, None if continued else current_principal.get())
        if not continued:
            await self._host.check_webhook(request.webhook)
        await self._store.get_session(agent_id, session_id)
        record = await self._store.get_turn_record(session_id, turn_id)
        if record.status != "awaiting_input":
            raise ConflictError(f"turn '{turn_id}' is not awaiting input (status: {record.status})")
        await self._previous_run_recorded(turn_id)
        pending = await self._store.pending_step(turn_id)
        decisions = list(request.approvals)
        held = _held_call_ids(pending)
        if self._holds is not None:  # decisions made in the inbox on calls the caller left undecided
            decisions += await self._holds.decisions(turn_id, held, {d.call_id for d in decisions})
        answer = complete_pending_step(pending, list(request.tool_responses), decisions)
        overrides = TurnOverrides.from_json(record.overrides)
        plan = await self._remembering(
            agent_id, await build_plan(agent.agent_config, overrides, self._tools, self._shields, provider_data)
        )
        async with self._host.admitting(turn_id):
            # Numbered on from the events stored by now: the run that paused has recorded its own.
            first_seq = await self._store.turn_event_count(turn_id)
            kept = keep_webhook(record.overrides, request.webhook, _run_key(turn_id, first_seq))
            record = await self._store.claim_resume(session_id, turn_id, self._leases.until(), overrides=kept)
            if self._holds is not None:
                await self._holds.turn_answered(turn_id, held)
            history = await self._history(session_id, turn_id)
            done = await self._store.list_turns([session_id], [turn_id])
            span = start_turn_span(
                record, "agents", session_id, agent_name=agent.agent_config.name, resumes=paused_span(record.overrides)
            )
            with ended_if_refused(span):
                state = TurnState(record, plan, history, steps=list(done[0].steps) if done else [], span=span)
                counted = RunMetrics("agents", decided=len(answer.ruling.approved) + len(answer.ruling.denied))
                metered = _metered(record, plan, first_seq)
                return self._launch(
                    record,
                    first_seq,
                    lambda emit: self._engine.resume(state, answer, emit),
                    counted,
                    metered,
                    request.webhook,
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
        webhook: str | None = None,
    ) -> LiveTurn:
        turn_id = record.turn_id

        async def settle(events: list[str]) -> None:
            try:
                await self._store.save_turn_events(turn_id, first_seq, events)
            except FerrymanError as exc:
                log.warning("events of turn %s not stored: %s", turn_id, exc.message)
            if webhook is not None:
                await self._notify(record, first_seq, webhook)

        owners = (record.agent_id or "", record.session_id, turn_id)  # the turn's own id: what interrupts it
        if self._holds is not None:
            run = _holding(run, self._holds, record.agent_id)
        if webhook is not None:
            run = self._host.armed(run, ArmedRun(kind="turn", run_id=turn_id, run_key=_run_key(turn_id, first_seq),
                                                 session_id=record.session_id))  # fmt: skip
        counted = counted or RunMetrics("agents")
        return self._host.launch(
            turn_id, _stream(turn_id), run, turn_event_data, settle, owners, first_seq, counted=counted, metered=metered
        )

    async def _notify(self, record: TurnRecord, first_seq: int, webhook: str) -> None:
        """Queue the end of a run of the turn (stored by now) for the webhook its request named, owned by the turn's
        owner (a run the approval inbox continues has its approver, or no one, as the caller)."""
        await self._queue_end(record, KeptWebhook(webhook, _run_key(record.turn_id, first_seq)))

    async def _queue_end(self, record: TurnRecord, hook: KeptWebhook) -> None:
        """Queue the turn's state (its run's end, stored by now) for ``hook``, owned by the turn's owner; a turn
        removed by then (a rollback, its session deleted) is told as ``turn.failed``, status ``deleted``."""
        try:
            turn = await self.get_turn(record.agent_id or "", record.session_id, record.turn_id)
        except NotFoundError:
            gone = {"turn_id": record.turn_id, "session_id": record.session_id, "status": "deleted"}
            owner = ("session", record.session_id)  # the turn's, gone with it
            await self._host.notify(hook.url, hook.run_key, record.turn_id, "turn.failed", gone, owner)
            return
        except FerrymanError as exc:  # unreadable now: nothing is told
            log.warning("the webhook of turn %s was not queued: %s", record.turn_id, exc.message)
            return
        data = turn.model_dump(mode="json")
        owned_as = ("turn", turn.turn_id)
        await self._host.notify(hook.url, hook.run_key, turn.turn_id, TURN_EVENTS.get(turn.status), data, owned_as)

    async def turn_events(self, agent_id: str, session_id: str, turn_id: str, after: int) -> AsyncIterator[StoredEvent]:
        """A turn's events numbered above ``after``: stored ones, then live ones until it ends (a turn a fork
        shares has ended: its events are its original's, read as the server)."""
        await self._store.get_session(agent_id, session_id)
        try:
            await self._store.get_turn_record(session_id, turn_id)
            shared = False
        except NotFoundError:
            await self._reads.inherited_turn(session_id, turn_id)
            shared = True

        async def stored_after(last: int) -> list[StoredEvent]:
            if shared:
                with acting_as(None):
                    return await self._store.turn_events_after(turn_id, last)
            return await self._store.turn_events_after(turn_id, last)

        async def is_running() -> bool:
            if shared:
                return False
            try:
                return (await self._store.get_turn_record(session_id, turn_id)).status in ("in_progress", "queued")
            except NotFoundError:  # deleted while followed: its stream just ends
                return False

        return await self._host.events(_stream(turn_id), after, stored_after, is_running)

    async def _close_abandoned(self, turn: ExpiredTurn) -> None:
        """Store what a dead replica streamed of a turn, end the stream with the turn's failure, and queue the
        failure for the webhook of the run it ended (the dead replica's task never will)."""
        turn_id = turn.turn_id
        try:
            stored = await self._store.turn_event_count(turn_id)

            def failure(seq: int) -> list[str]:
                return turn_event_data(TurnFailed(turn_id, FailureCode.INTERRUPTED, ABANDONED), seq)

            async def save(events: list[str]) -> None:
                await self._store.save_turn_events(turn_id, stored, events)

            await self._host.close_abandoned(_stream(turn_id), stored, failure, save)
        finally:  # failed in storage, whatever became of its stream
            await self._queue_abandoned(turn)

    async def _queue_abandoned(self, turn: ExpiredTurn) -> None:
        """Queue the failure of a turn a dead replica left for the webhook its run's request named, if any."""
        if turn.session_id is None:
            return
        try:
            record = await self._store.get_turn_record(turn.session_id, turn.turn_id)
        except FerrymanError as exc:  # deleted meanwhile: nothing is left to tell
            log.warning("the webhook of turn %s was not queued: %s", turn.turn_id, exc.message)
            return
        hook = kept_webhook(record.overrides)
        if hook is not None:
            await self._queue_end(record, hook)

    async def _recover_end(self, run: ArmedRun) -> bool:
        """Queue the end of an armed run of a turn that ended without queueing it; False while the run goes on."""
        try:
            record = await self._store.get_turn_record(run.session_id or "", run.run_id)
        except NotFoundError:  # deleted: nothing is left to tell
            return True
        hook = kept_webhook(record.overrides)
        if hook is None or hook.run_key != run.run_key:  # a later run replaced it: its end is no longer stored
            log.warning("the end of run %s of turn %s was not queued, and is lost", run.run_key, run.run_id)
            return True
        if record.status in ("in_progress", "queued"):
            return False
        await self._queue_end(record, hook)
        return True

    async def get_turn(self, agent_id: str, session_id: str, turn_id: str) -> Turn:
        """One turn with its completed steps (of a fork: its own, or one it shares, as its source holds it)."""
        await self._store.get_session(agent_id, session_id)
        turns = await self._store.list_turns([session_id], [turn_id])
        if not turns:
            return await self._reads.inherited_turn(session_id, turn_id)  # ended: never awaits approval
        turn = turns[0]
        if turn.status == "awaiting_input":
            pending = await self._store.pending_step(turn_id)
            if isinstance(pending, ToolExecutionStep) and pending.approval_requests:
                return turn.model_copy(update={"approval_requests": pending.approval_requests})
        return turn

    async def get_step(self, agent_id: str, session_id: str, turn_id: str, step_id: str) -> Step:
        """One step of a turn (of a fork: of its own turn, or of one it shares)."""
        await self._store.get_session(agent_id, session_id)
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

    async def _history(self, session_id: str, turn_id: str) -> list[Message]:
        """The history a turn reads: what its session shares (a fork's), then the session's own up to the turn."""
        shared = await self._reads.inherited_history(session_id)
        return [*shared, *await self._store.load_history(session_id, turn_id)]


def _stream(turn_id: str) -> str:
    return f"turn:{turn_id}"


async def _stream_named(turn_id: str) -> str:
    return _stream(turn_id)


def _run_key(turn_id: str, first_seq: int) -> str:
    """Names one run of a turn (its first, or a resume's from event ``first_seq``) for its webhook's delivery."""
    return f"{turn_id}.{first_seq}"


def _holding(
    run: Callable[[Emit], Awaitable[Turn]], holds: ApprovalHolds, agent_id: str | None
) -> Callable[[Emit], Awaitable[Turn]]:
    """The run, the calls its pause holds for approval stored before the pause reaches any client."""

    async def held(emit: Emit) -> Turn:
        async def noting(event: EngineEvent) -> None:
            if isinstance(event, TurnAwaitingInput) and event.turn.approval_requests:
                try:
                    await holds.hold_turn(event.turn, agent_id)
                except FerrymanError as exc:  # the turn paused all the same; its requests are on the turn
                    log.warning("approval requests of turn %s not in the inbox: %s", event.turn.turn_id, exc.message)
            await emit(event)

        return await run(noting)

    return held


def _held_call_ids(pending: Step | None) -> list[str]:
    """The call ids a paused step holds for approval (none: it waits for client tool results only)."""
    if isinstance(pending, ToolExecutionStep):
        return [request.call_id for request in pending.approval_requests or []]
    return []


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
