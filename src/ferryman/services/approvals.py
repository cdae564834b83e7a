"""The approval inbox (``/v1/approvals``, ferryman's own): every held call a caller may read, and its decisions.

A decision is recorded on the held call (once: a second one conflicts), and
when it was the run's last undecided call the server continues the run itself,
with the existing paths: a turn is resumed with the decisions (bound to the
digests of the stored arguments, as a client's resume is), a response is
continued by a background response answering its requests along its
``previous_response_id`` chain (or in its conversation). Both run like any
background run: leased, followed through their event streams. A turn whose
paused step also waits for client tool results is not continued: the client's
resume carries its results, and the inbox's decisions are added to it.

The continuation is durable: a decision and the claim of a run's
continuation are leased until the run has been continued, so a process that
died in between leaves a lease that runs out, and the sweep
(:mod:`ferryman.services.approval_sweep`) continues the run on some replica.

A response is continued with its stored parameters (``truncation`` too): what
is never stored (an MCP tool's ``headers`` and ``authorization``,
``guardrails``, ``context_management``, ``include``, ``reasoning``, provider
data) is not sent again, so a client that needs them answers the request
itself. Its request items are checked against the calls held first: a
conversation's items can be deleted and added anew. The caller who decides
only decides (it must be allowed to continue the run): the run goes on as the
principal who started the run that paused, the owner of the turn (not of its
session: a teammate's turn in an owner's session stays the teammate's) or of
the response (a continuing response is owned like the one it continues), as
the sweep continues it too; its quota, usage and memory are that principal's.
That principal deciding goes on as it is now; for another decider (and the
sweep) it is acted as with the attributes stored with the turn or response,
under the rule a schedule's runs follow (:mod:`ferryman.services.acting_owner`):
an API key's are read again, a subject's are acted with only for
``schedules.subject_lifetime_seconds`` after they were stored (when the turn
started, or the first response of a chain continued with them: a continuation
does not start that time anew), then only the subject may decide, a 409 tells
the others. A call whose run has no owner (auth off) goes on as the server.
Who sees the call stays who may read its session or response. One that refuses to go on
puts its pause's calls back in the inbox, undecided; one whose session,
response or conversation is gone takes them with it.

Who sees a held call is who may read its session or response (``approval_view.py``).
The continuing run posts its end to the webhook of the run that paused, if
that run's request named one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ferryman.api.agents import ResumeTurnRequest, ToolExecutionStep
from ferryman.api.approvals import Approval, ApprovalDecision, ApprovalList
from ferryman.api.responses import (
    ConversationRef,
    CreateResponseRequest,
    McpApprovalRequestItem,
    McpApprovalResponseItem,
    Response,
)
from ferryman.auth.principal import Principal, acting_as, current_principal
from ferryman.errors import ConflictError, FerrymanError, InvalidRequestError, NotFoundError
from ferryman.storage.base import Store
from ferryman.storage.domain.approvals import DECIDED, PENDING, HeldCall, HeldCalls
from ferryman.storage.domain.conversations import conversations
from ferryman.storage.domain.forks import Lineages
from ferryman.storage.domain.records import Stored
from ferryman.storage.kernel.model import Owner

from .access import Access
from .acting_owner import (
    LIFETIME_SETTING,
    acts_for_a_while,
    kept_since,
    owner_now,
    stale,
    stored_principal,
)
from .agents import AgentService
from .approval_holds import request_binding
from .approval_view import ApprovalView
from .fork_reads import ForkReads
from .record_guard import RecordGuard, owners_of
from .responses.service import ResponsesService
from .webhooks import stored_webhook

SOURCES = ("turn", "response")
HOLD_SECONDS = 60.0
"""How long a decision's or a claim's lease lasts: a continuation not started by then is the sweep's."""


@dataclass(frozen=True)
class RunOwner:
    """Who a continued run goes on as.

    Attributes:
        principal: The principal (None: the server).
        since: When the stored attributes it is acted with were taken (seconds since the epoch); None when it
            is acted as it is now.
    """

    principal: Principal | None
    since: float | None = None


class ApprovalService:
    """Lists the held calls a caller may read, records its decisions and continues the runs they free.

    Args:
        calls: The held calls.
        access: The access policy.
        store: The turns and responses.
        guard: The access step on them: a decider must be allowed to continue the run.
        agents: Resumes turns.
        responses: Continues responses.
        subject_lifetime_seconds: How long after its session or response was made a subject's stored attributes
            are acted with (``schedules.subject_lifetime_seconds``).
        hold_seconds: How long a decision or a claim is leased before the sweep may take its run over.
        clock: The time now, against which the subject's attributes are judged.
    """

    def __init__(
        self,
        calls: HeldCalls,
        access: Access,
        store: Store,
        guard: RecordGuard,
        agents: AgentService,
        responses: ResponsesService,
        *,
        subject_lifetime_seconds: int,
        hold_seconds: float = HOLD_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.hold_seconds = hold_seconds
        self._lifetime = subject_lifetime_seconds
        self._clock = clock
        self._calls = calls
        self._access = access
        self._store = store
        self._guard = guard
        self._reads = ForkReads(store, Lineages(store.kernel))
        self._conversations = conversations(store.kernel)
        self._agents = agents
        self._responses = responses

    async def list(
        self,
        who: Principal | None,
        *,
        agent_id: str | None = None,
        source: str | None = None,
        after: str | None = None,
        limit: int = 20,
        order: str = "desc",
    ) -> ApprovalList:
        """One page of the calls waiting for approval that ``who`` may read, newest first unless ``order`` is asc.

        Raises:
            InvalidRequestError: ``source`` is neither ``turn`` nor ``response``.
            NotFoundError: ``after`` names no approval the caller may read.
        """
        if source is not None and source not in SOURCES:
            raise InvalidRequestError("source must be 'turn' or 'response'", "source")
        if agent_id is not None and source == "response":
            return ApprovalList(data=[])  # a response has no agent
        where = ("agent_id", agent_id) if agent_id is not None else ("source", source) if source else None
        view = ApprovalView(self._access, who)
        if after is not None:
            cursor = await self._calls.find(after)
            if cursor is None or not view.admits(cursor):
                raise NotFoundError(f"approval '{after}' not found")
        kept: list[Stored[HeldCall]] = []
        while True:  # read on past the calls the wide filter admits and the caller may not read
            page = await self._calls.pending(view.wide, where, after, limit + 1, desc=order != "asc")
            kept += [held for held in page.items if view.admits(held)]
            if len(kept) > limit or not page.has_more:
                break
            after = page.items[-1].value.id
        data = [shown(held) for held in kept[:limit]]
        ids = [approval.id for approval in data]
        return ApprovalList(
            data=data, first_id=ids[0] if ids else None, last_id=ids[-1] if ids else None, has_more=len(kept) > limit
        )

    async def decide(self, who: Principal | None, approval_id: str, approve: bool, reason: str | None) -> Approval:
        """Record a decision on a pending call, and continue its run if no other call of it waits.

        Raises:
            NotFoundError: no approval ``who`` may read has this id (or its turn or response is gone).
            ForbiddenError: ``who`` may read the turn or response but not continue it.
            ConflictError: the call was decided already (here, or by a client answering its run itself), or
                another caller decides for a subject whose stored attributes are too old to act with.
        """
        found = await self._calls.find(approval_id)
        if found is None or not ApprovalView(self._access, who).admits(found):
            raise NotFoundError(f"approval '{approval_id}' not found")
        held = found.value
        if found.rec.status != PENDING:
            raise ConflictError(f"approval '{approval_id}' is already decided")
        await self._check_waiting(held)
        owner = await self.run_as(found, who)
        now = time.time()
        if not await self._calls.decide(approval_id, approve, reason, now, now + self.hold_seconds):
            raise ConflictError(f"approval '{approval_id}' is already decided")
        decided = held.model_copy(
            update={"decision": "approved" if approve else "denied", "reason": reason, "decided_at": now}
        )
        with acting_as(owner.principal):  # the decider decides; the run stays its owner's
            next_response_id = await self.continue_run(decided, since=owner.since)
        if next_response_id is not None:
            decided.next_response_id = next_response_id
        return shown(Stored(decided, found.rec), DECIDED)

    async def run_as(self, found: Stored[HeldCall], decider: Principal | None = None) -> RunOwner:
        """Who a held call's run goes on as: who started the paused run, as it is now if it decides itself.

        That is the turn's owner (the call's own, its session's owner, only for a turn stored with none) or the
        response's. For another decider (or none: the sweep), the owner as stored, as a schedule's runs act as
        theirs: an API key with its attributes now, a subject with those stored with the turn or response, only
        for ``schedules.subject_lifetime_seconds`` after they were stored.

        Raises:
            ConflictError: the owner is a subject whose stored attributes are older than that.
            ForbiddenError: the owner is an API key that was revoked or deleted.
        """
        held = found.value
        owner = await self._started_by(held, found.rec.owner)
        stored = stored_principal(owner)
        if stored is not None and stored.same_as(decider):
            return RunOwner(decider)
        if not acts_for_a_while(owner):
            return RunOwner(await owner_now(self._store.kernel, owner))
        since = await self._stored_at(held)
        if stale(owner, since + self._lifetime, self._clock()):
            made = "turn was started" if held.source == "turn" else "response was made"
            raise ConflictError(
                f"approval '{held.id}' would continue its run as its owner with the attributes the owner had "
                f"when its {made}, older than {LIFETIME_SETTING}: only the owner may decide it"
            )
        return RunOwner(stored, since)

    async def _started_by(self, held: HeldCall, stored: Owner | None) -> Owner | None:
        """The owner of the run that paused: the turn's (the call stores its session's), or the response's."""
        if held.source != "turn":
            return stored
        assert held.turn_id is not None
        turn_owner = (await owners_of(self._store, "turn", [held.turn_id])).get(held.turn_id)
        return turn_owner if turn_owner is not None else stored

    async def _stored_at(self, held: HeldCall) -> float:
        """When the attributes stored with the run's owner were taken: its turn's start, or its response's
        making (or, for a response continued with stored attributes, when those were taken)."""
        # The server's own look-up: the decider may not read the run's session (nothing here is checked).
        if held.source == "turn":
            assert held.session_id is not None and held.turn_id is not None
            return (await self._store.get_turn_record(held.session_id, held.turn_id)).started_at.timestamp()
        assert held.response_id is not None
        record = await self._store.get_response(held.response_id)
        turn = await self._store.get_turn_record(record.session_id, record.turn_id)
        since = kept_since(turn.overrides)
        return since if since is not None else float(record.response.created_at)

    async def _check_waiting(self, held: HeldCall) -> None:
        """Refuse a decision the caller may not act on, or on a run that can no longer be continued with it.

        A call whose turn, session, response or conversation is gone leaves the inbox (``NotFoundError``); one
        its run no longer waits for, or whose request item was changed, is answered (``ConflictError``). A
        caller who may not read the run is answered the same 404, but the call stays for those who may.
        """
        try:
            if held.source == "turn":
                await self._check_turn(held)
            else:
                await self._check_response(held)
        except NotFoundError:
            if await self._gone(held):
                await self._calls.delete_ids(held.held_with or [held.id])
            raise

    async def _check_turn(self, held: HeldCall) -> None:
        assert held.session_id is not None and held.turn_id is not None
        who = current_principal.get()
        await self._guard.check(who, "update", "session", held.session_id)
        record = await self._store.get_turn_record(held.session_id, held.turn_id)
        step = None
        if record.status == "awaiting_input":
            await self._guard.check(who, "read", "turn", held.turn_id)
            step = await self._store.pending_step(held.turn_id)
        requested = (step.approval_requests or []) if isinstance(step, ToolExecutionStep) else []
        if held.call_id not in {request.call_id for request in requested}:
            await self._calls.drop(held.held_with or [held.id])
            raise ConflictError(f"turn '{held.turn_id}' no longer waits for approval (status: {record.status})")

    async def _check_response(self, held: HeldCall) -> None:
        assert held.response_id is not None
        await self._guard.check(current_principal.get(), "update", "response", held.response_id)
        response = (await self._store.get_response(held.response_id)).response
        if response.status in ("queued", "in_progress"):
            raise ConflictError(f"response '{response.id}' is still in progress; decide once it is done")
        if response.status not in ("completed", "incomplete"):
            await self._calls.drop(held.held_with or [held.id])
            raise ConflictError(f"response '{response.id}' ended {response.status}; it cannot be continued")
        if response.conversation is not None:  # its run reads and writes the conversation's items
            await self._guard.check(current_principal.get(), "read", "conversation", response.conversation.id)
        await self._check_requests(response, [held])

    async def _check_requests(self, response: Response, calls: Sequence[HeldCall]) -> None:
        """Refuse to continue a response whose request items, as the continuation reads them (a conversation's
        items can be deleted and added anew), no longer hold the calls that were held; those calls are answered.

        Raises:
            NotFoundError: the response's conversation is gone.
            ConflictError: a request item was changed or removed.
        """
        conversation = response.conversation
        items = await self._reads.items(conversation.id) if conversation else list(response.output)
        requests = {item.id: item for item in items if isinstance(item, McpApprovalRequestItem)}
        changed = [
            call.id
            for call in calls
            if (request := requests.get(call.id)) is None
            or request_binding(request, response) != (call.digest, call.server_label)
        ]
        if changed:
            await self._calls.drop(changed)
            raise ConflictError(f"approval request '{changed[0]}' was changed or removed since it was held")

    async def continue_run(self, held: HeldCall, *, taken: bool = False, since: float | None = None) -> str | None:
        """Continue the run of a decided call once all its calls are decided; the continuing response's id, if any.

        Args:
            held: A decided call of the run.
            taken: The caller holds the claim of the run's continuation already (a sweep that took its lease).
            since: When the stored attributes the run goes on with were taken (None: it acts as it is now); a
                continuing response keeps it, so that its own calls are decided under the same bound.
        """
        run = await self._calls.of_run(held)
        if not run or any(call.rec.status == PENDING for call in run) or await self._waits_for_client(held):
            await self._calls.settle([held.id])  # not due: the last decision (or the client) continues it
            return None
        first = run[0].value.id
        if not taken and not await self._calls.claim(first, time.time() + self.hold_seconds):
            # Another decision, made at the same moment, continues it (or, if its process dies, the sweep).
            if held.id != first:
                await self._calls.settle([held.id])
            return None
        calls = [held if call.value.id == held.id else call.value for call in run]
        try:
            if held.source == "turn":
                await self._resume_turn(held, calls)
                next_id = None
            else:
                next_id = await self._continue_response(held, calls, since)
        except FerrymanError as exc:
            if isinstance(exc, NotFoundError) and await self._gone(held):
                await self._calls.delete_ids([call.id for call in calls])  # with their session or response
            else:
                # Refused (the turn moved on, the conversation is busy, the model is gone): the calls go back
                # to the inbox, undecided, for another try (or for the client to answer them itself).
                await self._calls.reopen([call.id for call in calls])
            raise
        except BaseException:
            # Not continued: the decisions stand, and the client's own answer, or the sweep once the lease
            # runs out, goes on.
            await self._calls.unclaim(first)
            raise
        await self._calls.settle([call.id for call in calls], {"next_response_id": next_id} if next_id else None)
        return next_id

    async def _gone(self, held: HeldCall) -> bool:
        """Whether the turn, or the response or its conversation, that holds the call was deleted."""
        try:
            if held.source == "turn":
                assert held.session_id is not None and held.turn_id is not None
                await self._store.get_turn_record(held.session_id, held.turn_id)
            else:
                assert held.response_id is not None
                await self._store.get_response(held.response_id)
                if held.conversation_id is not None:
                    return await self._conversations.find(held.conversation_id) is None
        except NotFoundError:
            return True
        return False

    async def _waits_for_client(self, held: HeldCall) -> bool:
        """Whether the turn's paused step also waits for client tool results (the client resumes it then)."""
        if held.source != "turn":
            return False
        assert held.turn_id is not None
        step = await self._store.pending_step(held.turn_id)
        if not isinstance(step, ToolExecutionStep):
            return False
        done = {response.call_id for response in step.tool_responses}
        requested = {request.call_id for request in step.approval_requests or []}
        return any(call.call_id not in done and call.call_id not in requested for call in step.tool_calls)

    async def _resume_turn(self, held: HeldCall, calls: Sequence[HeldCall]) -> None:
        assert held.agent_id is not None and held.session_id is not None and held.turn_id is not None
        decisions = [
            ApprovalDecision(call_id=c.call_id, approve=c.decision == "approved", reason=c.reason, digest=c.digest)
            for c in calls
        ]
        # The run goes on with the webhook of the run that paused, if its request named one.
        hook = await stored_webhook(self._store, held.session_id, held.turn_id)
        request = ResumeTurnRequest(approvals=decisions, stream=False, webhook=hook.url if hook else None)
        # The resumed run goes on in the background, leased like any; its events are the turn's stream.
        await self._agents.resume_turn(held.agent_id, held.session_id, held.turn_id, request, continued=True)

    async def _continue_response(self, held: HeldCall, calls: Sequence[HeldCall], since: float | None) -> str:
        assert held.response_id is not None
        record = await self._store.get_response(held.response_id)
        response = record.response
        hook = await stored_webhook(self._store, record.session_id, record.turn_id)
        answers = [
            McpApprovalResponseItem(approval_request_id=c.id, approve=c.decision == "approved", reason=c.reason)
            for c in calls
        ]
        await self._check_requests(response, calls)
        conversation = response.conversation
        request = CreateResponseRequest(
            model=response.model,
            input=list(answers),
            instructions=response.instructions,
            tools=list(response.tools),
            tool_choice=response.tool_choice,
            parallel_tool_calls=response.parallel_tool_calls,
            max_tool_calls=response.max_tool_calls,
            max_output_tokens=response.max_output_tokens,
            temperature=response.temperature,
            top_p=response.top_p,
            text=response.text,
            truncation=response.truncation,
            metadata=response.metadata or None,
            previous_response_id=None if conversation else response.id,
            conversation=ConversationRef(id=conversation.id) if conversation else None,
            background=True,
            webhook=hook.url if hook else None,
        )
        live = await self._responses.create(request, None, continued=True, acting_since=since)
        return live.subject.record.response.id


def shown(held: Stored[HeldCall], status: str | None = None) -> Approval:
    """A held call as the API shows it."""
    call = held.value
    state = status or held.rec.status
    return Approval(
        id=call.id,
        status="pending" if state == PENDING or call.decision is None else call.decision,
        tool_name=call.tool_name,
        arguments=call.arguments,
        server_label=call.server_label,
        agent_id=call.agent_id,
        session_id=call.session_id,
        turn_id=call.turn_id,
        response_id=call.response_id,
        conversation_id=call.conversation_id,
        call_id=call.call_id,
        digest=call.digest,
        created_at=int(held.rec.at),
        decided_at=int(call.decided_at) if call.decided_at is not None else None,
        reason=call.reason,
        next_response_id=call.next_response_id,
    )
