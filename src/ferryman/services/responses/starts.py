"""Starting a response: its request checked, its history, plan and context read, then it is stored with its turn in
one write, and launched."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ferryman.api.content import Message, ToolResponseMessage, UserMessage
from ferryman.api.responses import CreateResponseRequest, Item
from ferryman.auth.principal import current_principal
from ferryman.engine.approvals import Ruling
from ferryman.engine.context_fit import minimal_fit
from ferryman.engine.state import TurnState
from ferryman.engine.tracing import ended_if_refused, start_turn_span
from ferryman.errors import (
    ConflictError,
    ConversationLockedError,
    FerrymanError,
    IdempotencyKeyInUseError,
    InvalidRequestError,
    NotFoundError,
)
from ferryman.ids import new_id, utcnow
from ferryman.inference.context import check_context
from ferryman.inference.router import ModelRouter
from ferryman.logs import log_fields
from ferryman.safety.base import ShieldRegistry
from ferryman.storage.base import KeySettlement, ResponseRecord, ResponseStart, SessionRecord, TurnRecord
from ferryman.storage.domain.forks import Lineages

from ..acting_owner import keep_since
from ..approval_holds import ApprovalHolds
from ..fork_reads import ForkReads
from ..host import TurnHost
from ..idempotency import Claim, ResponseReplay, forget_stored, settlement, stored
from ..run_metrics import RunMetrics
from ..webhooks import keep_webhook
from .approvals import has_answers, rule_answers
from .compaction import ConversationRead, Sealing
from .created import initial_response, validate_request
from .guardrails import resolve_guardrails
from .hosted.table import HostedTools
from .items import input_items, items_to_messages, with_ids
from .multitask import ConversationQueue
from .paused import paused_response_span
from .plan import response_plan
from .reads import ResponseReads
from .redaction import InputItems
from .runs import LiveResponse, ResponseRuns, stream
from .stream import ResponseEncoder

_SETTLING = 10.0
"""The most seconds a response answering approval requests waits for the conversation's last response to be
stored (by this process)."""

log = logging.getLogger(__name__)


class ResponseStarts:
    """Starts responses.

    Args:
        host: Storage, the runner, leases and quotas.
        models: The model router, to check the model exists and the first prompt fits its context.
        hosted: The hosted tools offered.
        shields: The shields ``guardrails`` may name.
        holds: The approval inbox, told of the requests a response's input answers (None: no inbox).
        sealing: Opens the ``compaction`` items an input or a conversation holds.
        reads: Reads the ``previous_response_id`` chain a response continues.
        queue: Checks a queued response may make way as its strategy says.
        runs: Launches the response's run.
    """

    def __init__(
        self,
        host: TurnHost,
        models: ModelRouter,
        hosted: HostedTools,
        shields: ShieldRegistry,
        holds: ApprovalHolds | None,
        sealing: Sealing,
        reads: ResponseReads,
        queue: ConversationQueue,
        runs: ResponseRuns,
    ) -> None:
        self._host = host
        self._store = host.store
        self._leases = host.leases
        self._models = models
        self._hosted = hosted
        self._shields = shields
        self._holds = holds
        self._sealing = sealing
        self._reads = reads
        # It reads only a conversation's items, once the conversation was read as the caller (``_context``).
        self._fork_reads = ForkReads(self._store, Lineages(self._store.kernel))
        self._queue = queue
        self._runs = runs

    async def create(
        self,
        request: CreateResponseRequest,
        provider_data: dict[str, Any] | None,
        continued: bool = False,
        acting_since: float | None = None,
        replayed_by: Claim | None = None,
    ) -> LiveResponse:
        """Start a response; it runs in the background whatever the caller does next (see ``ResponsesService``)."""
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
        turn_id, response_id = new_id(), new_id("resp")
        # Admitted before anything is stored: a caller over its quota leaves no session behind.
        async with self._host.admitting(turn_id), self._host.launching(stream(response_id)):
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
                earlier = [*earlier, *await self._reads.chain_items(request.previous_response_id), *items]
            chain_root = request.previous_response_id if conversation_id is None else None
            binding = await self._hosted.bind(
                request, session_id, earlier, lambda: self._reads.root(chain_root, session_id)
            )
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
                record = ResponseRecord(
                    response=initial_response(response_id, request, conversation_id, queued),
                    turn_id=turn.turn_id,
                    session_id=session_id,
                    conversation_id=conversation_id,
                    previous_response_id=request.previous_response_id,
                    background=bool(request.background),
                )
                saved = False
                try:
                    replay = ResponseReplay(response_id, -1, tuple(request.include or ()), bool(request.stream))
                    start = ResponseStart(record, turn, new_messages, items, new_session)
                    await self._start(start, settlement(replayed_by, replay))
                    saved = True
                    stored(replayed_by)
                    if ruled is not None and self._holds is not None:
                        answered = [c.call_id for c in ruled.approved] + [c.call_id for c, _ in ruled.denied]
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
                        return self._runs.launch(
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
                except BaseException as exc:
                    if saved or not isinstance(exc, FerrymanError):  # a start refused stored nothing
                        await asyncio.shield(self._not_started(response_id, saved, replayed_by))
                    raise

    async def _not_started(self, response_id: str, saved: bool, claim: Claim | None) -> None:
        """Remove a response whose run was never launched, its key first; ``saved``: its write is known to have
        stored it (else its outcome is unknown: whatever it stored goes)."""
        try:
            if saved:
                await forget_stored(self._store, claim)
            elif claim is not None:
                await self._store.forget_idempotency_key(claim.record)
            try:
                await self._store.delete_response(response_id)
            except NotFoundError:
                if saved:
                    raise
        except Exception:  # its lease runs out and the sweep fails it: the call's own error matters more
            log.exception("response %s was not started, and what it stored could not be removed", response_id)

    async def _context(
        self, request: CreateResponseRequest, conversation_id: str | None, items: list[Item]
    ) -> tuple[list[Message], str, list[Item], SessionRecord | None]:
        """The history a new response continues, its session, the conversation's items (if it has one), and
        the session to store once the response is accepted (outside a conversation: its own)."""
        if conversation_id is not None:
            conversation = await self._reads.conversation(conversation_id)
            if has_answers(items):
                # A client that saw the last response complete may answer its approval requests before this
                # process has stored that response's items: its run stays live here until they are, though its
                # turn is stored as completed a moment before.
                await self._host.runner.settled_owned_by(conversation.session_id, _SETTLING)
            items = await self._sealing.opened(await self._fork_reads.items(conversation_id))  # a fork's shared too
            return items_to_messages(items), conversation.session_id, items, None
        prior: list[Message] = []
        if request.previous_response_id:
            prior = await self._reads.chain(request.previous_response_id)
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
        return rule_answers(items, await self._reads.chain_items(request.previous_response_id))

    async def _start(self, start: ResponseStart, settle: KeySettlement | None) -> None:
        """Store the response with its session (if new) and its turn, in one write, owned by the caller, who
        must be allowed to create each and to update the session it runs in."""
        conversation_id = start.record.conversation_id
        who, guard = current_principal.get(), self._host.guard
        owner, made = await guard.starting(who, start)
        try:
            await self._store.start_response(start, settle, owner)
            guard.created(who, *made)
        except IdempotencyKeyInUseError:
            raise
        except ConflictError as exc:
            if conversation_id is None:
                raise
            raise ConversationLockedError(
                f"conversation '{conversation_id}' has a response in progress; retry when it is done"
            ) from exc


def _conversation_read(conversation_id: str | None, earlier: list[Item], items: list[Item]) -> ConversationRead | None:
    """Where a response's read of its conversation ends (None: it is in none), as read when it is created."""
    first = items[0].id if items else None
    if conversation_id is None or first is None:
        return None
    return ConversationRead(earlier[-1].id if earlier else None, first)
