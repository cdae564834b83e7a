"""Starting and resuming the Agents API's turns: their plans, inputs and context checked, then their runs launched."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.trace import Span

from ferryman.api.agents import (
    Agent,
    CreateTurnRequest,
    ResumeTurnRequest,
    Step,
    ToolExecutionStep,
    Turn,
    TurnError,
)
from ferryman.api.content import Message, TurnInputMessage, UserMessage
from ferryman.auth.principal import Principal, current_principal
from ferryman.engine.events import Emit
from ferryman.engine.memory import MemoryDocument
from ferryman.engine.plan import TurnOverrides, TurnPlan
from ferryman.engine.resume import complete_pending_step
from ferryman.engine.state import TurnState
from ferryman.engine.tracing import ended_if_refused, paused_span, start_turn_span
from ferryman.errors import ConflictError, FailureCode, FerrymanError, InvalidRequestError
from ferryman.ids import new_id, utcnow
from ferryman.knowledge.chunking import count_tokens
from ferryman.storage.base import KeySettlement, TurnRecord, turn_from_record
from ferryman.storage.kernel.model import Owner

from .approval_holds import ApprovalHolds
from .documents import attach_documents, document_texts
from .fork_reads import ForkReads
from .host import TurnHost
from .idempotency import Claim, TurnReplay, forget_stored, settlement, stored
from .run_metrics import RunMetrics
from .turn_plans import Messages, TurnInputs, TurnPlans
from .turn_queue import TurnQueue
from .turn_reads import TurnReads, stream, stream_named
from .turn_runs import LiveTurn, TurnRuns, run_key
from .usage import RunUsage
from .webhooks import keep_webhook

log = logging.getLogger(__name__)

RUN_END_WAIT_SECONDS = 5.0
"""How long a resume waits for another replica to finish recording the run that paused."""


class TurnStarts:
    """Starts and resumes turns.

    Args:
        host: Storage, the turn engine, the runner, leases and the fan-out.
        inputs: What a turn's plan and input are made with.
        holds: The approval inbox, told of the calls a resume answers (None: no inbox).
        agent: One agent a caller (None: the server) may read, as kept for the turns that follow.
        reads: The history forks share with their sources.
        turns: Reads the history a turn reads.
        runs: Launches a turn's runs.
    """

    def __init__(
        self,
        host: TurnHost,
        inputs: TurnInputs,
        holds: ApprovalHolds | None,
        agent: Callable[[str, Principal | None], Awaitable[Agent]],
        reads: ForkReads,
        turns: TurnReads,
        runs: TurnRuns,
    ) -> None:
        self._host = host
        self._store = host.store
        self._guard = host.guard
        self._leases = host.leases
        self._fanout = host.fanout
        self._engine = host.engine
        self._runner = host.runner
        self._inputs = inputs
        self._plans = TurnPlans(inputs)
        self._holds = holds
        self._agent = agent
        self._reads = reads
        self._turns = turns
        self._runs = runs
        self._queue = TurnQueue(
            self._store,
            host.guard,
            self._runner,
            self._fanout,
            stream_named,
            host.cancel_everywhere,
            host.rollback_wait_seconds,
        )

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
        kept in memory for this run only, never stored. ``replayed_by``'s key is
        stored with the turn, naming this run as its outcome.

        Raises:
            ContextLengthExceededError: the instructions, memory, history, input and tools are longer than the
                model's context (less the answer's room); nothing is left stored (a turn stored to read the
                memory in the same trip is removed again).
        """
        who = current_principal.get()
        agent = await self._agent(agent_id, who)
        await self._host.check_webhook(request.webhook)
        await self._guard.check(who, "update", "session", session_id)  # a turn is a write to its session
        overrides = TurnOverrides(list(request.toolgroups or []), request.tool_config)
        plan = await self._plans.bare(agent, overrides, provider_data)
        if request.documents:  # fetch nothing for a session that does not exist
            await self._turns.session(agent_id, session_id)
        history_inputs, memorized = await self._documents(request)
        turn_id = new_id()
        owner = self._guard.creating(who, ("turn", turn_id))
        queued = request.multitask_strategy != "reject"
        if queued:  # checked before it is stored, with the memory as it is now (read again when it starts)
            plan = await self._plans.remembering(agent_id, plan)
            await self._plans.check(plan, history_inputs, _whole(self._turns, session_id, turn_id, history_inputs))
        record = TurnRecord(
            turn_id=turn_id,
            session_id=session_id,
            agent_id=agent_id,
            status="in_progress",
            input_messages=list(request.messages),
            started_at=utcnow(),
            overrides=keep_webhook(overrides.to_json(), request.webhook, run_key(turn_id, 0)),
            lease_until=self._leases.until(),
        )
        span = start_turn_span(record, "agents", session_id, agent_name=agent.agent_config.name)
        with ended_if_refused(span):
            async with self._host.admitting(record.turn_id), self._host.launching(stream(turn_id)):
                settle = _run_of(replayed_by, agent_id, session_id, turn_id, 0, request.stream)
                if queued:
                    return await self._enqueue(
                        record, owner, plan, history_inputs, memorized, span, request, replayed_by
                    )
                shared = await self._reads.inherited_history(session_id)  # ended turns only: never changes
                # The memory blocks are read in the start's own trip, so the prompt is checked once it is stored.
                blocks = self._plans.memory_read(agent_id)
                started = False
                try:
                    history = await self._store.start_turn(
                        record, list(history_inputs), owner=owner, settle=settle, along=blocks
                    )
                    started = True
                    self._guard.created(who, ("turn", turn_id))
                    stored(replayed_by)
                    plan = await self._plans.remembered(plan, blocks)
                    await self._plans.check(plan, history_inputs, _known([*shared, *history]))
                    state = TurnState(record, plan, [*shared, *history], documents=memorized, span=span)
                    return self._runs.launch(
                        record,
                        0,
                        lambda emit: self._engine.run(state, emit),
                        metered=_metered(record, plan, 0),
                        webhook=request.webhook,
                    )
                except BaseException as exc:
                    if started or (blocks is not None and blocks.written):
                        await asyncio.shield(self._unstart(record, replayed_by, exc))
                    raise

    async def _unstart(self, record: TurnRecord, claim: Claim | None, error: BaseException) -> None:
        """Remove a stored turn whose run was never launched (its prompt did not fit, or its call failed), its
        key first: a repeat that found the key meanwhile is told to retry (see ``TurnHost.launching``), and a
        later one runs again."""
        record.status, record.completed_at = "failed", utcnow()
        if isinstance(error, FerrymanError):
            record.error = TurnError(code=error.code, message=error.message)
        else:
            record.error = TurnError(code=FailureCode.INTERNAL_ERROR, message="the turn could not be started")
        try:
            await forget_stored(self._store, claim)
            await self._store.finish_turn(record)
            await self._store.delete_turn(record.session_id, record.turn_id)
        except Exception:  # its lease runs out and the sweep fails it: the call's own error matters more
            log.exception("turn %s was stored but not started, and could not be removed", record.turn_id)

    async def _enqueue(
        self,
        record: TurnRecord,
        owner: Owner | None,
        plan: TurnPlan,
        inputs: list[TurnInputMessage],
        documents: list[MemoryDocument],
        span: Span,
        request: CreateTurnRequest,
        replayed_by: Claim | None,
    ) -> LiveTurn:
        """Store the turn ``queued`` and launch a run that starts it in its place in the queue (``turn_queue.py``);
        ``interrupt`` first cancels the session's running turn, ``rollback`` cancels and deletes it. Once it
        starts, it reads its history and the agent's memory blocks as they are then. ``owner`` is stored as the
        turn's."""
        strategy = request.multitask_strategy
        await self._queue.check(record.session_id, strategy)
        record.status = "queued"
        settle = _run_of(replayed_by, record.agent_id or "", record.session_id, record.turn_id, 0, request.stream)
        await self._store.start_turn(record, list(inputs), load_history=False, owner=owner, settle=settle)
        self._guard.created(current_principal.get(), ("turn", record.turn_id))
        stored(replayed_by)
        ready: list[TurnState] = []

        async def started() -> None:
            history = await self._turns.history(record.session_id, record.turn_id)
            now = await self._plans.remembering(record.agent_id or "", plan)
            ready.append(TurnState(record, now, history, documents=documents, span=span))

        async def run(emit: Emit) -> Turn:
            if not await self._queue.take_turn(record, strategy, span, emit, self._leases.until, started):
                return turn_from_record(record, [])
            return await self._engine.run(ready[0], emit)

        return self._runs.launch(record, 0, run, metered=_metered(record, plan, 0), webhook=request.webhook)

    async def _documents(self, request: CreateTurnRequest) -> tuple[list[TurnInputMessage], list[MemoryDocument]]:
        """The turn's input messages, with its documents inlined, or the documents to retrieve from if too large."""
        messages, documents = list(request.messages), list(request.documents or [])
        if not documents:
            return messages, []
        if not any(isinstance(m, UserMessage) for m in messages):  # before fetching anything for nothing
            raise InvalidRequestError("documents need a user message to attach to", "documents")
        texts = await document_texts(documents, self._inputs.fetch)
        if self._inputs.memory is None or await _fit(texts, self._inputs.inline_document_tokens):
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
        replayed_by: Claim | None = None,
    ) -> LiveTurn:
        """Continue a turn that awaits client tool results or decisions on its approval requests.

        ``continued``: the server continues the run itself (the approval inbox), with the webhook of the run
        that paused, checked when that run's request named it (and again at every attempt). It reads the agent
        as the server: the inbox checked that the decider may update the session, and the run goes on with
        what its caller may read now (memory blocks, sessions), whether or not that still includes the agent.
        """
        if not request.tool_responses and not request.approvals:
            raise InvalidRequestError("a resume needs tool_responses, approvals, or both", "tool_responses")
        who = current_principal.get()
        agent = await self._agent(agent_id, None if continued else who)
        if not continued:
            await self._host.check_webhook(request.webhook)
        await self._guard.check(who, "read", "session", session_id)
        await self._guard.check(who, "read", "turn", turn_id)
        pausing = self._runner.task(turn_id)  # taken before the read: a run leaves once its events are stored
        point = await self._store.resume_point(agent_id, session_id, turn_id)
        if point.record.status != "awaiting_input":
            raise ConflictError(f"turn '{turn_id}' is not awaiting input (status: {point.record.status})")
        first_seq = await self._events_after_pause(turn_id, pausing, point.events)
        decisions = list(request.approvals)
        held = _held_call_ids(point.pending)
        if self._holds is not None:  # decisions made in the inbox on calls the caller left undecided
            decisions += await self._holds.decisions(turn_id, held, {d.call_id for d in decisions})
        answer = complete_pending_step(point.pending, list(request.tool_responses), decisions)
        overrides = TurnOverrides.from_json(point.record.overrides)
        plan = await self._plans.bare(agent, overrides, provider_data)
        async with self._host.admitting(turn_id), self._host.launching(stream(turn_id)):
            kept = keep_webhook(point.record.overrides, request.webhook, run_key(turn_id, first_seq))
            settle = _run_of(replayed_by, agent_id, session_id, turn_id, first_seq, request.stream)
            blocks = self._plans.memory_read(agent_id)  # read in the claim's own trip, with the history
            until = self._leases.until()
            await self._guard.check(who, "update", "session", session_id)
            # The claim answers the pause this resume read (``pending``), not one a resume racing it made since.
            resumed = await self._store.claim_resume(
                session_id, turn_id, until, overrides=kept, settle=settle, load_history=True, along=blocks,
                pending=point.pending.step_id if point.pending is not None else None,
            )  # fmt: skip
            stored(replayed_by)
            try:
                record = resumed.record
                plan = await self._plans.remembered(plan, blocks)
                history = [*await self._reads.inherited_history(session_id), *resumed.history]
                span = start_turn_span(
                    record, "agents", session_id, agent_name=agent.agent_config.name, resumes=paused_span(kept)
                )
                with ended_if_refused(span):
                    state = TurnState(record, plan, history, steps=point.steps, span=span)
                    counted = RunMetrics("agents", decided=len(answer.ruling.approved) + len(answer.ruling.denied))
                    metered = _metered(record, plan, first_seq)
                    live = self._runs.launch(
                        record,
                        first_seq,
                        lambda emit: self._engine.resume(state, answer, emit),
                        counted,
                        metered,
                        request.webhook,
                    )
            except BaseException:
                await asyncio.shield(self._unresume(point.record, replayed_by))
                raise
        await self._answered(turn_id, held)
        return live

    async def _unresume(self, paused: TurnRecord, claim: Claim | None) -> None:
        """Put back a turn whose resume was stored but whose run was never launched: awaiting input again with
        the overrides of the run that paused it, its key forgotten first (a repeat runs again), instead of
        running until its lease runs out. Its inbox calls stay open: they are closed once a run is launched."""
        try:
            await forget_stored(self._store, claim)
            await self._store.finish_turn(paused, overrides=paused.overrides)
        except Exception:  # its lease runs out and the sweep fails it: the call's own error matters more
            log.exception("turn %s was resumed but not run, and could not be put back", paused.turn_id)

    async def _answered(self, turn_id: str, held: list[str]) -> None:
        """Close the inbox's calls the launched run answers (a failure leaves them to the inbox's sweep, which
        finds the turn no longer waiting on them)."""
        if self._holds is None:
            return
        try:
            await self._holds.turn_answered(turn_id, held)
        except Exception:  # the run goes on: failing the call now would invite a resume that cannot run
            log.exception("the inbox calls of turn %s were answered but could not be closed", turn_id)

    async def _events_after_pause(self, turn_id: str, pausing: asyncio.Task[Any] | None, counted: int) -> int:
        """How many events the turn holds once the run that paused it has recorded its own: a resumed run numbers
        on from there, never reusing a number of that run's.

        The pause is stored, and announced, a moment before that run's events are. ``counted`` is what a read
        made after ``pausing`` (that run's task here, None: not here) was taken found.
        """
        if pausing is not None:  # still here before the read: its events may have come after it
            await asyncio.wait([pausing])  # its outcome is its own; a cancelled resume leaves it be
            return await self._store.turn_event_count(turn_id)
        try:
            async with asyncio.timeout(RUN_END_WAIT_SECONDS):
                published = await self._fanout.wait_run_end(stream(turn_id))
        except TimeoutError:  # a replica that died mid-record: go on with what is stored by now
            return await self._store.turn_event_count(turn_id)
        return counted if published is None else max(counted, published)


def _known(messages: list[Message]) -> Messages:
    """Messages already read, as a check asks for them."""

    async def whole() -> list[Message]:
        return messages

    return whole


def _whole(turns: TurnReads, session_id: str, turn_id: str, inputs: list[TurnInputMessage]) -> Messages:
    """The whole first prompt's messages of a turn not yet stored: the session's history, then its input."""

    async def whole() -> list[Message]:
        return [*await turns.history(session_id, turn_id), *inputs]

    return whole


def _run_of(
    claim: Claim | None, agent_id: str, session_id: str, turn_id: str, first_seq: int, streamed: bool | None
) -> KeySettlement | None:
    """What the write that starts a run stores with its request's idempotency key: the run, from its first event
    (a repeat of a request that did not stream is answered with the turn as that run left it)."""
    return settlement(claim, TurnReplay(agent_id, session_id, turn_id, first_seq - 1, bool(streamed)))


def _held_call_ids(pending: Step | None) -> list[str]:
    """The call ids a paused step holds for approval (none: it waits for client tool results only)."""
    if isinstance(pending, ToolExecutionStep):
        return [request.call_id for request in pending.approval_requests or []]
    return []


def _metered(record: TurnRecord, plan: TurnPlan, first_seq: int) -> RunUsage:
    """What counts the usage of a run of the turn (its first, or a resume's from event ``first_seq``)."""
    return RunUsage("agents", record.turn_id, first_seq, plan.model, record.agent_id, record.session_id)


async def _fit(texts: list[str], limit: int) -> bool:
    """Whether the texts hold at most ``limit`` tokens together (counted off the event loop: they can be long)."""
    if sum(len(text) for text in texts) <= limit:  # every token spans a character at least
        return True
    counted = await asyncio.to_thread(lambda: sum(count_tokens(text) for text in texts))
    return counted <= limit
