"""The Responses API's operations: each response runs as one turn of the shared engine."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ferryman.api.agents import MultitaskStrategy, TurnError
from ferryman.api.content import Message, ToolResponseMessage, UserMessage
from ferryman.api.responses import (
    CompactedResponse,
    CompactRequest,
    CreateResponseRequest,
    Item,
    ListedResponse,
    Response,
    Usage,
)
from ferryman.context_settings import ContextSettings
from ferryman.coordination.base import CancelTurns, RecordDeleted
from ferryman.engine.approvals import Ruling
from ferryman.engine.channel import LiveRun
from ferryman.engine.context_fit import minimal_fit, since_last_summary
from ferryman.engine.events import Emit
from ferryman.engine.state import TurnState
from ferryman.engine.summary import summarize
from ferryman.engine.tracing import ended_if_refused, start_turn_span
from ferryman.errors import (
    ConflictError,
    ConversationLockedError,
    FailureCode,
    FerrymanError,
    InvalidRequestError,
    NotFoundError,
)
from ferryman.ids import new_id, utcnow
from ferryman.inference.context import check_context
from ferryman.inference.router import ModelRouter
from ferryman.logs import log_fields
from ferryman.safety.base import ShieldRegistry
from ferryman.storage.base import ExpiredTurn, Page, ResponseRecord, SessionRecord, StoredEvent, TurnRecord
from ferryman.storage.domain.forks import Lineages
from ferryman.webhooks.outbox import ArmedRun

from ..acting_owner import keep_since
from ..approval_holds import ApprovalHolds
from ..fork_reads import ForkReads
from ..host import TurnHost
from ..idempotency import Claim, ResponseReplay, settlement, stored
from ..leases import ABANDONED
from ..owned_store import authorize
from ..run_metrics import RunMetrics
from ..usage import RunUsage
from ..webhooks import RESPONSE_EVENTS, keep_webhook, stored_webhook
from .approvals import has_answers, rule_answers
from .compaction import ConversationRead, Sealing, compacted, user_messages
from .created import initial_response, validate_request
from .guardrails import resolve_guardrails
from .history import HistoryCache
from .hosted.table import HostedTools
from .included import shown_events, shown_items, shown_response
from .items import input_items, items_to_messages, read_window, with_ids
from .multitask import ConversationQueue
from .paused import paused_response_span
from .plan import response_plan
from .redaction import InputItems
from .stream import ResponseEncoder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResponseRun:
    """What the Responses API keeps of a response running in this process."""

    record: ResponseRecord
    encoder: ResponseEncoder


LiveResponse = LiveRun[ResponseRun]
"""A response running in this process: its events, its task, and the response as it stands."""


class ResponsesService:
    """Create, read, replay, cancel, list and delete responses.

    Args:
        host: Storage, the turn engine, the runner, leases and the fan-out (the same as the Agents API's).
        models: The model router, to check the model exists.
        cache: Finished responses' histories, so that chains are not re-read.
        hosted: The hosted tools offered (``file_search``, ``mcp``, ``code_interpreter``, ``web_search``).
        shields: The shields ``guardrails`` may name (None: none).
        holds: The approval inbox, told of the requests responses end with and of those answered (None: no inbox).
        context: Compaction's key and summary model (``context:`` in the config; default: a generated key).
    """

    def __init__(
        self,
        host: TurnHost,
        models: ModelRouter,
        cache: HistoryCache,
        hosted: HostedTools,
        shields: ShieldRegistry | None = None,
        holds: ApprovalHolds | None = None,
        context: ContextSettings | None = None,
    ) -> None:
        self._host = host
        self._store = host.store
        self._leases = host.leases
        self._fanout = host.fanout
        self._engine = host.engine
        self._models = models
        self._cache = cache
        self._hosted = hosted
        self._session_deleted: list[Callable[[str], Awaitable[None]]] = []
        self._shields = shields or ShieldRegistry()
        self._holds = holds
        context = context or ContextSettings()
        self._sealing = Sealing(context.key(), self._store.kernel)
        self._reads = ForkReads(self._store, Lineages(self._store.kernel))
        self._queue = ConversationQueue(host, self._sealing, _stream)
        self._summary_model = context.summary_model
        host.on_abandoned(lambda turn: turn.response_id is not None, self._close_abandoned)
        if host.webhooks is not None:
            host.webhooks.recoverers["response"] = self._recover_end

    async def create(
        self,
        request: CreateResponseRequest,
        provider_data: dict[str, Any] | None,
        continued: bool = False,
        acting_since: float | None = None,
        replayed_by: Claim | None = None,
    ) -> LiveResponse:
        """Start a response; it runs in the background whatever the caller does next.

        ``continued``: the server continues a response itself (the approval inbox), with the webhook of the
        response it continues, checked when that response's request named it (and again at every attempt).
        ``acting_since``: it runs as its owner with attributes stored then, kept with its turn (a later
        continuation of it is bound by the same time). ``replayed_by``: the request's idempotency key, stored
        with the response as the stream its repeats read again.
        """
        validate_request(request)
        self._hosted.validate(request)
        await self._hosted.check(request)
        if not continued:
            await self._host.check_webhook(request.webhook)
        await self._models.route(request.model)
        guardrails = await resolve_guardrails(request, self._shields)
        items = await self._sealing.opened(with_ids(input_items(request.input)))
        if not items:
            raise InvalidRequestError("input must hold at least one item", "input")
        turn_id, response_id = new_id(), f"resp_{uuid.uuid4().hex}"
        # Admitted before anything is stored: a caller over its quota leaves no session behind.
        async with self._host.admitting(turn_id), self._host.launching(_stream(response_id)):
            conversation_id = request.conversation_id()
            prior, session_id, earlier, new_session = await self._context(request, conversation_id, items)
            # Items the client sends back (say, the function call it answers) already stand
            # in the conversation; they are part of the history once, not twice.
            known = {item.id for item in earlier}
            items = [item for item in items if item.id not in known]
            if not items:
                raise InvalidRequestError("input holds no item that is not already in the conversation", "input")
            read = _conversation_read(conversation_id, earlier, items)
            ruled = await self._ruled(request, items, earlier)
            if self._hosted.wants_prior(request):
                earlier = [*earlier, *await self._chain_items(request.previous_response_id), *items]
            chain_root = request.previous_response_id if conversation_id is None else None
            binding = await self._hosted.bind(request, session_id, earlier, lambda: self._root(chain_root, session_id))
            new_messages = items_to_messages(items)
            plan = response_plan(
                request,
                provider_data,
                binding.server_tools,
                frozenset(binding.held),
                guardrails,
                tuple(binding.unlisted),
            )
            compaction = await self._sealing.history_items(plan.context.strategy, read)  # its key read before the turn
            if plan.context.strategy == "disabled":
                await check_context(self._models, plan.chat_request([*prior, *new_messages]))
            else:  # only what no strategy leaves out must fit
                await minimal_fit(self._models, plan.chat_request, [*prior, *new_messages])
            if new_session is not None:
                await self._store.create_session(new_session)
            # In a conversation, a response sent with a strategy other than reject waits its turn (multitask.py).
            queued = conversation_id is not None and request.multitask_strategy != "reject"
            turn = TurnRecord(
                turn_id=turn_id,
                session_id=session_id,
                agent_id=None,
                status="queued" if queued else "in_progress",
                input_messages=[m for m in new_messages if isinstance(m, UserMessage | ToolResponseMessage)],
                started_at=utcnow(),
                overrides=keep_since(keep_webhook({}, request.webhook, response_id), acting_since),
                lease_until=self._leases.until(),
            )
            resumes = await paused_response_span(self._store, request, items)
            span = start_turn_span(
                turn, "responses", conversation_id or session_id, response_id=response_id, resumes=resumes
            )
            with ended_if_refused(span):
                if queued:  # one that would stop a response the caller may not stop is refused first
                    await self._queue.check(session_id, request.multitask_strategy)
                await self._start_turn(turn, new_messages, conversation_id)
                record = ResponseRecord(
                    response=initial_response(response_id, request, conversation_id, queued),
                    turn_id=turn.turn_id,
                    session_id=session_id,
                    conversation_id=conversation_id,
                    previous_response_id=request.previous_response_id,
                    background=bool(request.background),
                )
                try:
                    replay = ResponseReplay(response_id, -1, tuple(request.include or ()))
                    await self._store.save_response(record, settlement(replayed_by, replay))
                    stored(replayed_by)
                    await self._store.add_items(response_id, items)
                except BaseException:
                    # Never leave the turn running (and its conversation locked) behind a failed start.
                    turn.status, turn.completed_at = "failed", utcnow()
                    turn.error = TurnError(code=FailureCode.INTERNAL_ERROR, message="the response could not be stored")
                    await asyncio.shield(self._store.finish_turn(turn))
                    raise
                if ruled is not None and self._holds is not None:
                    answered = [call.call_id for call in ruled.approved] + [call.call_id for call, _ in ruled.denied]
                    await self._holds.requests_answered(answered)
                copies = InputItems(self._store, response_id, items, self._sealing)
                state = TurnState(
                    turn,
                    plan,
                    [*prior, *new_messages],
                    ruled=ruled,
                    fresh=len(new_messages),
                    input_copies=copies,
                    span=span,
                )
                encoder = ResponseEncoder(
                    record.response,
                    set(plan.client_tools),
                    binding.renderers,
                    binding.announced,
                    held=binding.held,
                    approved=ruled.approved if ruled else None,
                    compaction=compaction,
                )
                decided = len(ruled.approved) + len(ruled.denied) if ruled else 0
                with log_fields(response_id=response_id):  # what the run logs names the response too
                    return self._launch(
                        record,
                        state,
                        items,
                        encoder,
                        request.store is not False,
                        RunMetrics("responses", decided),
                        request.webhook,
                        (request.multitask_strategy, conversation_id, new_messages, read)
                        if queued and conversation_id is not None
                        else None,
                    )

    async def _context(
        self, request: CreateResponseRequest, conversation_id: str | None, items: list[Item]
    ) -> tuple[list[Message], str, list[Item], SessionRecord | None]:
        """The history a new response continues, its session, the conversation's items (if it has one), and
        the session to store once the response is accepted (outside a conversation: its own)."""
        if conversation_id is not None:
            conversation = await self._store.get_conversation(conversation_id)
            if has_answers(items):
                # A client that saw the last response complete may answer its approval requests before this
                # process has stored that response's items.
                queue = await self._store.session_queue(conversation.session_id)
                await self._host.runner.settled([turn for turn, status in queue if status == "in_progress"], _SETTLING)
            items = await self._sealing.opened(await self._reads.items(conversation_id))  # a fork's shared too
            return items_to_messages(items), conversation.session_id, items, None
        prior: list[Message] = []
        if request.previous_response_id:
            prior = await self._chain(request.previous_response_id)
        session = SessionRecord(new_id(), None, "response", utcnow())
        return prior, session.session_id, [], session

    async def _ruled(
        self, request: CreateResponseRequest, items: list[Item], conversation_items: list[Item]
    ) -> Ruling | None:
        """The held calls of earlier responses that the input approves or denies (see ``approvals.py``)."""
        if not has_answers(items):
            return None
        if request.conversation_id() is not None:
            return rule_answers(items, conversation_items)
        return rule_answers(items, await self._chain_items(request.previous_response_id))

    async def _chain_items(self, previous_id: str | None) -> list[Item]:
        """The items of a ``previous_response_id`` chain, oldest first: each response's input and output."""
        items: list[Item] = []
        while previous_id is not None:
            try:
                record = await self._store.get_response(previous_id)
            except NotFoundError:  # the chain stops at a deleted response, as its history does
                break
            items = [*await self._store.all_items(previous_id), *record.response.output, *items]
            previous_id = record.previous_response_id
        return items

    async def _root(self, previous_id: str | None, session_id: str) -> str:
        """The session of a chain's first response (still stored), or ``session_id`` when there is no chain."""
        root = session_id
        while previous_id is not None:
            try:
                record = await self._store.get_response(previous_id)
            except NotFoundError:  # the chain stops at a deleted response, as its history does
                break
            root, previous_id = record.session_id, record.previous_response_id
        return root

    async def _chain(self, previous_id: str) -> list[Message]:
        status = (await self.get(previous_id)).status
        if status in ("queued", "in_progress"):
            raise ConflictError(f"response '{previous_id}' is still in progress; continue it once it is done")
        if status not in ("completed", "incomplete"):
            raise InvalidRequestError(f"response '{previous_id}' ended {status}; it cannot be continued", "input")
        cached = self._cache.get(previous_id)
        return cached if cached is not None else await self._store.chain_history(previous_id)

    async def _start_turn(self, turn: TurnRecord, messages: list[Message], conversation_id: str | None) -> None:
        try:
            await self._store.start_turn(turn, messages, load_history=False)
        except ConflictError as exc:
            if conversation_id is None:
                raise
            raise ConversationLockedError(
                f"conversation '{conversation_id}' has a response in progress; retry when it is done"
            ) from exc

    def _launch(
        self,
        record: ResponseRecord,
        state: TurnState,
        items: list[Item],
        encoder: ResponseEncoder,
        store: bool,
        counted: RunMetrics,
        webhook: str | None = None,
        waits: tuple[MultitaskStrategy, str, list[Message], ConversationRead | None] | None = None,
    ) -> LiveResponse:
        """Run the response in the background (``waits``: first wait its turn in this conversation, with these
        new messages, reading it again then)."""
        response_id = record.response.id

        async def settle(events: list[str]) -> None:
            response = encoder.response
            done = response.status in ("completed", "incomplete")
            conversation_items = [*items, *response.output] if done else []
            if done and store and self._holds is not None:
                # Held before the response is stored as done: no client can answer its requests before then.
                await self._hold(response, record.session_id)
            await self._store.finish_response(record, events, conversation_items)
            if webhook is not None:
                shown = shown_response(response.model_copy(deep=True), None).model_dump(mode="json")
                event, owner = RESPONSE_EVENTS.get(response.status), ("response", response_id)
                await self._host.notify(webhook, response_id, response_id, event, shown, owner)
            if done and store:
                self._cache.put(response_id, state.history, record.previous_response_id)
            if not store:
                await self._store.delete_response(response_id)
                await self._session_ended(record)

        async def run(emit: Emit) -> Response:
            if waits is not None and not await self._queue.take_turn(state, *waits, emit):
                return encoder.response
            await self._engine.run(state, emit)
            return encoder.response

        armed = ArmedRun(kind="response", run_id=response_id, run_key=response_id)
        return self._host.launch(
            state.record.turn_id,
            _stream(response_id),
            run if webhook is None else self._host.armed(run, armed),
            encoder.encode,
            settle,
            (response_id, record.session_id, state.record.turn_id),  # the turn's id: what interrupts it
            subject=ResponseRun(record, encoder),
            counted=counted,
            metered=RunUsage("responses", response_id, 0, state.plan.model, None, record.conversation_id),
        )

    async def _hold(self, response: Response, session_id: str) -> None:
        """Put the approval requests a finished response ended with in the inbox."""
        assert self._holds is not None
        try:
            await self._holds.hold_response(response, session_id)
        except FerrymanError as exc:  # the response ends all the same; its requests are in its output
            log.warning("approval requests of response %s not in the inbox: %s", response.id, exc.message)
        except Exception:  # held before the response is stored as done: never keep it from being stored
            log.exception("approval requests of response %s not in the inbox", response.id)

    async def compact(self, request: CompactRequest, provider_data: dict[str, Any] | None) -> CompactedResponse:
        """Summarize a conversation (its input items, after its previous response's, if named) into a
        ``compaction`` item, which a later input gives in place of what it summarized (``compaction.py``).

        The summary is made by ``context.summary_model``, else the request's model, within that model's context.
        The user messages kept are those the model reads: none that a response's ``compaction`` item replaced.
        """
        await self._models.route(request.model)
        items = await self._sealing.opened(with_ids(input_items(request.input or "")))
        earlier: list[Item] = []
        history: list[Message] = []
        if request.previous_response_id:
            history = await self._chain(request.previous_response_id)
            earlier = await self._sealing.opened(await self._chain_items(request.previous_response_id))
        # What a compaction replaced is neither summarized again nor kept: its summary stands for it.
        history = since_last_summary([*history, *items_to_messages(items)])
        if not history:
            raise InvalidRequestError("nothing to compact: give input, previous_response_id, or both", "input")
        made = await summarize(self._models, self._summary_model or request.model, history, provider_data)
        used = made.usage
        usage = Usage(
            input_tokens=used.input_tokens if used else 0,
            output_tokens=used.output_tokens if used else 0,
            total_tokens=used.input_tokens + used.output_tokens if used else 0,
        )
        kept = user_messages(read_window([*earlier, *items]))
        return compacted(kept, await self._sealing.seal(made.text), usage)

    def _live(self, response_id: str) -> LiveResponse | None:
        return self._host.live(_stream(response_id))

    async def get(self, response_id: str, include: frozenset[str] = frozenset()) -> Response:
        """A response, live or stored (the store is asked either way: it says whether the caller may see it).

        Args:
            response_id: The response.
            include: What the reader asks to see of its output (``included.py``).
        """
        stored = await self._store.get_response(response_id)
        live = self._live(response_id)
        if live is not None:
            return shown_response(live.subject.encoder.response.model_copy(deep=True), include)
        return shown_response(stored.response, include)

    async def replay(
        self, response_id: str, starting_after: int, include: frozenset[str] = frozenset()
    ) -> AsyncIterator[StoredEvent]:
        """The stream events after ``starting_after``, then live ones until the response ends.

        Args:
            response_id: The response.
            starting_after: The number of the last event the reader has (-1: none).
            include: What the reader asks to see of the items the events hold (``included.py``).
        """
        record = await self._store.get_response(response_id)  # also when live: the caller may not see it
        if self._live(response_id) is None and record.response.status not in _RUNNING:
            # A run stores its final state and its events together; a replica failing a dead one's
            # response stores the state first and the events a moment later: until then, they are
            # read from the dead replica's stream.
            stored = await self._store.events_after(response_id, starting_after)
            if stored:
                return shown_events(_iterate(stored), include)
        return shown_events(await self._events(response_id, starting_after), include)

    async def _events(self, response_id: str, after: int) -> AsyncIterator[StoredEvent]:
        async def stored_after(last: int) -> list[StoredEvent]:
            return await self._store.events_after(response_id, last)

        async def is_running() -> bool:
            # The turn's status too: a response whose final state failed to be stored would
            # otherwise look as if it ran forever.
            try:
                record = await self._store.get_response(response_id)
                if record.response.status not in _RUNNING:
                    return False
                turn = await self._store.get_turn_record(record.session_id, record.turn_id)
                return turn.status in ("in_progress", "queued")
            except NotFoundError:  # deleted while followed: its stream just ends
                return False

        return await self._host.events(_stream(response_id), after, stored_after, is_running)

    async def _close_abandoned(self, turn: ExpiredTurn) -> None:
        """Store what a dead replica streamed of a response, ending the stream with ``response.failed``, and
        queue the failure for the webhook its request named (the dead replica's task never will)."""
        assert turn.response_id is not None
        record = await self._store.get_response(turn.response_id)
        encoder = ResponseEncoder(record.response, set())

        def failure(seq: int) -> list[str]:
            return encoder.fail_abandoned(seq, ABANDONED)

        async def save(events: list[str]) -> None:
            await self._store.finish_response(record, events, [])

        try:
            # Responses store their events when they end: none is stored yet.
            await self._host.close_abandoned(_stream(turn.response_id), 0, failure, save)
        finally:  # failed in storage, whatever became of its stream
            await self._queue_abandoned(record)

    async def _recover_end(self, run: ArmedRun) -> bool:
        """Queue the end of an armed response that ended without queueing it; False while it goes on."""
        try:
            record = await self._store.get_response(run.run_id)
        except NotFoundError:  # deleted: nothing is left to tell
            return True
        if record.response.status in _RUNNING:
            return False
        await self._queue_abandoned(record)
        return True

    async def _queue_abandoned(self, record: ResponseRecord) -> None:
        """Queue the failure of a response a dead replica left for the webhook its request named, if any."""
        response_id = record.response.id
        try:
            hook = await stored_webhook(self._store, record.session_id, record.turn_id)
            if hook is None:
                return
            response = (await self._store.get_response(response_id)).response
        except FerrymanError as exc:  # deleted meanwhile: nothing is left to tell
            log.warning("the webhook of response %s was not queued: %s", response_id, exc.message)
            return
        shown = shown_response(response, None).model_dump(mode="json")
        event = RESPONSE_EVENTS.get(response.status)
        await self._host.notify(hook.url, hook.run_key, response_id, event, shown, ("response", response_id))

    async def _stop_elsewhere(self, record: ResponseRecord, reason: str) -> None:
        """Ask the replica running a response to cancel it, and wait until it stored the outcome."""
        if record.response.status not in _RUNNING:
            return
        await self._fanout.notify(CancelTurns(record.response.id, reason))
        async for _ in await self._events(record.response.id, -1):
            pass

    async def cancel(self, response_id: str) -> Response:
        """Cancel a background response; cancelling a finished one changes nothing."""
        stored = await self._store.get_response(response_id)  # also when live: the caller may not see it
        await authorize(self._store, "update", "response", response_id)  # before stopping anything
        live = self._live(response_id)
        record = live.subject.record if live is not None else stored
        if not record.background:
            raise InvalidRequestError("only background responses can be cancelled", "response_id")
        if live is not None:
            await self._host.stop(live, "cancelled by the client")
        else:
            await self._stop_elsewhere(record, "cancelled by the client")
        return shown_response((await self._store.get_response(response_id)).response, None)

    async def delete(self, response_id: str) -> None:
        """Delete a response (cancelling it first if it still runs)."""
        stored = await self._store.get_response(response_id)  # also when live: the caller may not see it
        await authorize(self._store, "delete", "response", response_id)  # before stopping anything
        live = self._live(response_id)
        if live is not None:
            await self._host.stop(live, "the response was deleted")
        else:
            await self._stop_elsewhere(stored, "the response was deleted")
        await self._store.delete_response(response_id)
        if self._host.webhooks is not None:
            await self._host.webhooks.forget(run_id=response_id)
        self.forget(response_id)
        if self._holds is not None:
            await self._holds.response_deleted(stored.response)
        await self._session_ended(stored)
        await self._fanout.notify(RecordDeleted(response_id, "response"))

    def on_session_deleted(self, callback: Callable[[str], Awaitable[None]]) -> None:
        """Have ``callback(session_id)`` run when a response outside a conversation is deleted.

        What is kept under that session (a code interpreter's container, which a
        ``previous_response_id`` chain keeps under its first response's session) goes with it.
        """
        self._session_deleted.append(callback)

    async def _session_ended(self, record: ResponseRecord) -> None:
        if record.conversation_id is None:  # a conversation's session ends with the conversation
            for callback in self._session_deleted:
                await callback(record.session_id)

    def forget(self, response_id: str | None) -> None:
        """Drop what this replica cached of a deleted response (None: of every response)."""
        self._cache.drop(response_id)

    async def input_items(
        self, response_id: str, after: str | None, limit: int, order: str, include: frozenset[str] = frozenset()
    ) -> Page[Item]:
        """A page of a response's input items, as a reader asking for ``include`` sees them."""
        await self._store.get_response(response_id)
        page = await self._store.list_items(response_id, after, limit, order)
        return Page(shown_items(page.items, include), page.has_more)

    async def list(
        self, after: str | None, limit: int, order: str, conversation_id: str | None = None
    ) -> Page[ListedResponse]:
        """A page of stored responses (of one conversation, if given), each with its input items.

        A listing takes no ``include``.

        Raises:
            NotFoundError: the conversation is missing, or the caller may not read it.
        """
        if conversation_id is not None:
            await self._store.get_conversation(conversation_id)
        page = await self._store.list_responses(after, limit, order, conversation_id)
        listed = []
        for record in page.items:
            inputs = await self._store.all_items(record.response.id)
            response = ListedResponse.model_validate({**dict(record.response), "input": inputs})
            listed.append(shown_response(response, None))
        return Page(listed, page.has_more)


_RUNNING = ("queued", "in_progress")
_SETTLING = 10.0
"""The most seconds a response answering approval requests waits for the conversation's last response to be
stored (by this process)."""


def _conversation_read(conversation_id: str | None, earlier: list[Item], items: list[Item]) -> ConversationRead | None:
    """Where a response's read of its conversation ends (None: it is in none), as read when it is created."""
    first = items[0].id if items else None
    if conversation_id is None or first is None:
        return None
    return ConversationRead(earlier[-1].id if earlier else None, first)


def _stream(response_id: str) -> str:
    return f"response:{response_id}"


async def _iterate(events: list[StoredEvent]) -> AsyncIterator[StoredEvent]:
    for event in events:
        yield event
