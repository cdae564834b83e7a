"""The storage seam: records and the protocols every backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from ferryman.api.agents import Step, Turn, TurnStatus
from ferryman.api.content import Message, TurnInputMessage
from ferryman.api.responses import Item, Response
from ferryman.errors import IdempotencyKeyInUseError
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Op, ReadOp
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.knowledge import KnowledgeStore
from ferryman.storage.page import Page as Page
from ferryman.turn_records import StepWrite as StepWrite
from ferryman.turn_records import StoredEvent as StoredEvent
from ferryman.turn_records import TurnRecord as TurnRecord
from ferryman.turn_records import turn_from_record as turn_from_record


@dataclass(frozen=True)
class SessionRecord:
    """A stored session, without its turns."""

    session_id: str
    agent_id: str | None
    session_name: str
    started_at: datetime


@dataclass(frozen=True)
class ExpiredTurn:
    """A running turn failed because its lease ran out, and the response it ran for (if any).

    ``session_id`` says where to read the turn (compared by the turn and response alone).
    """

    turn_id: str
    response_id: str | None = None
    session_id: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ResumePoint:
    """What a resume reads of a paused turn before it claims the turn, in one read.

    Attributes:
        record: The turn's own columns.
        steps: Its completed steps, in order.
        pending: The tool-execution step it waits on (None: none).
        events: How many of its stream events are stored.
    """

    record: TurnRecord
    steps: list[Step]
    pending: Step | None
    events: int


@dataclass(frozen=True)
class Resumed:
    """A turn a claim moved to running, and (when asked) the history it continues, read in the claim's write."""

    record: TurnRecord
    history: list[Message] = field(default_factory=list)


class SessionStore(Protocol):
    """The anchors of sessions, where their turns hang, written and deleted with each session's kernel record.

    A session's own fields and owner are its ``session`` record (:mod:`ferryman.storage.domain.agents`), which
    services read and list through the kernel. No backend checks that a session's agent exists: the service
    that opens one does, in the kernel.
    """

    async def create_session(
        self, session: SessionRecord, owner: Owner | None = None, settle: KeySettlement | None = None
    ) -> None:
        """Store a new session's record, with ``owner`` (None: none), and its anchor, and ``settle``'s idempotency
        key outcome, in one write.

        Raises:
            ConflictError: a session with this id exists.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        ...

    async def delete_session(self, agent_id: str, session_id: str) -> None:
        """Delete a session of an agent (its record, its anchor and its turns) in one write.

        Raises:
            NotFoundError: the agent has no such session.
        """
        ...


class TurnStore(Protocol):
    """Turns, their steps and the conversation history they build."""

    async def start_turn(
        self,
        record: TurnRecord,
        history: list[Message],
        load_history: bool = True,
        owner: Owner | None = None,
        settle: KeySettlement | None = None,
        along: ReadAlong | None = None,
    ) -> list[Message]:
        """Store a new running turn and its input messages, and return (if asked) its full history.

        The history is the messages of the session's completed earlier turns,
        then this turn's own, read in the same transaction as the insert. ``owner``
        (None: none) is stored as the turn's owner in that transaction too, and so is
        ``settle``'s idempotency key outcome. ``along``'s kernel reads are answered in the
        same round trip, after the writes.

        Raises:
            NotFoundError: the session does not exist (for this agent).
            ConflictError: another turn of the session is running, or (for a running turn) some wait queued:
                a new turn does not overtake them.
        """
        ...

    async def claim_resume(
        self,
        session_id: str,
        turn_id: str,
        lease_until: datetime,
        expected: TurnStatus = "awaiting_input",
        overrides: dict[str, Any] | None = None,
        settle: KeySettlement | None = None,
        load_history: bool = False,
        along: ReadAlong | None = None,
        pending: str | None = None,
    ) -> Resumed:
        """Move an awaiting turn back to running (or, with ``expected="queued"``, start a queued one), under a
        lease until ``lease_until``; ``overrides``, when given, replace the turn's in the same write (what this
        run keeps with it), as ``settle``'s idempotency key outcome is stored. The result holds the turn as the
        write left it.

        With ``load_history``, the history the turn continues (as :meth:`load_history` reads it) comes back in
        the same round trip, and so do ``along``'s kernel reads. With ``pending`` (a step id), the turn must
        still wait on that step: a resume answers the pause it read, not a later one.

        Raises:
            NotFoundError: no such turn in this session.
            ConflictError: the turn is not ``expected``, no longer waits on ``pending``, or another turn of the
                session runs.
        """
        ...

    async def resume_point(self, agent_id: str, session_id: str, turn_id: str) -> ResumePoint:
        """Read a turn with its steps and its stored events' count, in one read.

        Raises:
            NotFoundError: the session is not the agent's, or the turn not the session's.
        """
        ...

    async def save_step(self, turn_id: str, write: StepWrite, infer_iters: int) -> None:
        """Store (or replace) a step, its history messages and the turn's inference count."""
        ...

    async def redact_turn_input(self, turn_id: str, inputs: list[TurnInputMessage], messages: list[Message]) -> None:
        """Replace a running turn's input messages and its own history messages, in one write.

        An input shield's redacted form takes the place of what the caller sent, so that
        the turn, the history later turns read and the response chains hold no more of it.
        ``messages`` replace every history message the turn stored so far.

        Raises:
            NotFoundError: the turn no longer exists.
            ConflictError: the turn no longer runs.
        """
        ...

    async def finish_turn(
        self, record: TurnRecord, last: StepWrite | None = None, overrides: dict[str, Any] | None = None
    ) -> None:
        """Store a turn's final or awaiting state (status, output, error, completion time), with its last step;
        ``overrides``, when given, replace the turn's (a resume put back restores those of the run that paused).

        Only a running or queued turn is finished: one that ended meanwhile keeps that end.
        """
        ...

    async def delete_turn(self, session_id: str, turn_id: str) -> None:
        """Delete a turn that does not run, with its steps, history messages, stream events and response.

        Raises:
            NotFoundError: no such turn in this session.
            ConflictError: the turn is running.
        """
        ...

    async def turn_owners(self, turn_ids: list[str]) -> dict[str, Owner]:
        """The owners of those of these turns that exist and have one (stored with the turn, so gone with it)."""
        ...

    async def get_turn_record(self, session_id: str, turn_id: str) -> TurnRecord:
        """Return a turn's own columns or raise NotFoundError."""
        ...

    async def session_queue(self, session_id: str) -> list[tuple[str, TurnStatus]]:
        """The ids and statuses of the session's running and queued turns, oldest first (an index read: no
        step or message is read)."""
        ...

    async def pending_step(self, turn_id: str) -> Step | None:
        """Return the tool-execution step a paused turn waits on."""
        ...

    async def load_history(self, session_id: str, turn_id: str) -> list[Message]:
        """Messages of the session's completed turns before this one, then this turn's own.

        Of a turn not stored yet: every completed turn's, the history a new turn would continue.
        """
        ...

    async def turn_messages(self, session_id: str, turn_ids: list[str]) -> dict[str, list[Message]]:
        """Each named turn's own history messages, in the order stored (none of the earlier turns' it
        continues), in one read; a turn not of this session, or without messages, is left out."""
        ...

    async def list_turns(self, session_ids: list[str], turn_ids: list[str] | None = None) -> list[Turn]:
        """Full turns (with completed steps) of the given sessions, in the order they started."""
        ...

    async def get_step(self, session_id: str, turn_id: str, step_id: str) -> Step:
        """Return one step or raise NotFoundError."""
        ...

    async def renew_leases(self, turn_ids: list[str], until: datetime) -> list[str]:
        """Extend the leases of those of these turns that still run to ``until``; return the others' ids."""
        ...

    async def fail_expired_turns(self, now: datetime, message: str) -> list[ExpiredTurn]:
        """Fail every running turn whose lease ended before ``now``, and the response it ran for.

        The turn gets the error code ``interrupted`` with ``message``; its
        session accepts new turns again.

        Returns:
            The turns failed by this call (each is returned to one caller only).
        """
        ...

    async def save_turn_events(self, turn_id: str, first_seq: int, events: list[str]) -> None:
        """Store a turn's stream events (each its JSON data), numbered from ``first_seq``.

        A number already stored keeps its event.

        Raises:
            NotFoundError: the turn does not exist.
        """
        ...

    async def turn_events_after(self, turn_id: str, after: int) -> list[StoredEvent]:
        """The stored stream events of a turn with a number above ``after``, in order."""
        ...

    async def turn_event_count(self, turn_id: str) -> int:
        """How many stream events of a turn are stored."""
        ...


@dataclass(frozen=True)
class ConversationRecord:
    """A stored conversation; its turns run in its own session."""

    conversation_id: str
    session_id: str
    metadata: dict[str, str]
    created_at: int


@dataclass
class ResponseRecord:
    """A stored response: the turn it ran as and its latest wire form."""

    response: Response
    turn_id: str
    session_id: str
    conversation_id: str | None = None
    previous_response_id: str | None = None
    background: bool = False


@dataclass(frozen=True)
class ResponseStart:
    """What starting a response stores in one write: its turn with the turn's own history messages, the
    response with its input items and, for a response outside a conversation, the new session both run in.

    Raises:
        ValueError: the response, its turn and the new session do not name the same turn, session and agent.
    """

    record: ResponseRecord
    turn: TurnRecord
    messages: list[Message]
    items: Sequence[Item] = ()
    session: SessionRecord | None = None
    """The session to create first (None: the turn runs in ``record.session_id``, which exists)."""

    def __post_init__(self) -> None:
        record, turn, session = self.record, self.turn, self.session
        if (turn.turn_id, turn.session_id) != (record.turn_id, record.session_id) or (
            session is not None and (session.session_id, session.agent_id) != (record.session_id, turn.agent_id)
        ):
            raise ValueError(f"response {record.response.id}: its turn and session do not match its record")


class ResponseStore(Protocol):
    """Responses, conversations and their items (in OpenAI form)."""

    async def create_conversation(
        self,
        record: ConversationRecord,
        items: list[Item],
        owner: Owner | None = None,
        settle: KeySettlement | None = None,
        session: SessionRecord | None = None,
    ) -> None:
        """Store a conversation's record (with its owner), its first items and ``settle``'s idempotency key outcome,
        in one transaction; its session must exist, unless it is ``session``, which the same transaction opens (its
        record with the same owner, and its anchor).

        A backend writes :func:`~ferryman.storage.domain.conversations.conversation_writes` beside what opening a
        session writes.

        Raises:
            NotFoundError: its session does not exist.
            ConflictError: the id is taken (the conversation's, or the session's it opens).
            InvalidRequestError: an item id repeats.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        ...

    async def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation's record and its items in one transaction (responses stay): written once,
        :class:`~ferryman.storage.domain.conversations.ConversationDeletes`.

        Raises:
            NotFoundError: it does not exist.
        """
        ...

    async def add_items(self, owner: str, items: list[Item], settle: KeySettlement | None = None) -> None:
        """Append items (with ids) to a conversation or to a response's input, with ``settle``'s idempotency key
        outcome in the same transaction.

        Raises:
            InvalidRequestError: an item id repeats.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        ...

    async def replace_items(self, owner: str, items: list[Item]) -> None:
        """Replace the bodies of an owner's stored items, matched by id; each keeps its place.

        An item id the owner does not hold is left out (nothing is added).
        """
        ...

    async def list_items(self, owner: str, after: str | None, limit: int, order: str) -> Page[Item]:
        """Items of an owner in order ``asc`` or ``desc``, after the item ``after``."""
        ...

    async def all_items(self, owner: str) -> list[Item]:
        """Every item of an owner, oldest first."""
        ...

    async def items_of(self, owners: list[str]) -> dict[str, list[Item]]:
        """Every item of each of these owners, oldest first, in one read (an owner without items: absent)."""
        ...

    async def get_item(self, owner: str, item_id: str) -> Item:
        """One item or NotFoundError."""
        ...

    async def delete_item(self, owner: str, item_id: str) -> None:
        """Delete one item or raise NotFoundError."""
        ...

    async def start_response(
        self, start: ResponseStart, settle: KeySettlement | None = None, owner: Owner | None = None
    ) -> None:
        """Store a new response with everything it starts with, in one transaction (Redis: one script): the new
        session, if any; the turn, running or queued, with its messages, refused as ``start_turn`` refuses one;
        the response with its input items and its kernel record; ``owner`` (None: none) as the owner of each
        (the session's and the response's in their records), and ``settle``'s
        idempotency key outcome. A refused start stores nothing.

        Raises:
            NotFoundError: the turn's session does not exist (and is not ``start.session``).
            ConflictError: ``start.session`` exists already; or, as ``start_turn`` raises it, the session runs
                another turn or has some queued.
            IdempotencyKeyInUseError: ``settle``'s claim no longer holds its key.
            IdempotencyKeyHeldError: ``settle`` claims its key, and an earlier call holds it.
            InvalidRequestError: an input item id repeats.
        """
        ...

    async def finish_response(self, record: ResponseRecord, events: list[str], conversation_items: list[Item]) -> None:
        """Store a finished response with its stream events (each its JSON data, numbered from 0) and its
        conversation's new items, atomically."""
        ...

    async def get_response(self, response_id: str) -> ResponseRecord:
        """Return a response or raise NotFoundError."""
        ...

    async def responses_by_id(self, response_ids: list[str]) -> list[ResponseRecord]:
        """The responses with these ids that exist, in the order given (a page of their kernel records, listed by
        the services, read whole)."""
        ...

    async def turn_response(self, session_id: str, turn_id: str) -> str | None:
        """The id of the response the session's turn runs for (None: no such turn, or a turn of the Agents API),
        read by the turn's id alone: one indexed read, however many responses the session holds."""
        ...

    async def delete_response(self, response_id: str) -> None:
        """Delete a response, its record, and the turn (and session) it ran as, or raise NotFoundError."""
        ...

    async def events_after(self, response_id: str, after: int) -> list[StoredEvent]:
        """The stored stream events of a response with a sequence number above ``after``, in order."""
        ...

    async def chain_history(self, response_id: str) -> list[Message]:
        """The whole conversation up to and including a response, along ``previous_response_id``."""
        ...


@dataclass(frozen=True)
class IdempotencyRecord:
    """An idempotency key in use: whose, for which request, until when, and the first call's outcome.

    ``token`` tells one claim of a key from a later one (after the first
    expired or was released); ``result`` is what the HTTP layer stored of the
    first call's answer, ``None`` while that call still runs. A record whose
    ``expires_at`` has passed counts as absent.
    """

    owner: str
    key: str
    token: str
    fingerprint: str
    created_at: datetime
    expires_at: datetime
    result: str | None = None


@dataclass(frozen=True)
class KeySettlement:
    """An idempotency key's outcome, stored in the same write as the record its call made.

    A pending claim (``claiming`` false) is completed: the write stores ``result`` with the key, until
    ``expires_at``, only while ``claim`` still holds it and has no result; otherwise it changes nothing and
    raises ``IdempotencyKeyInUseError`` (the claim lapsed and another call holds the key). With ``claiming``
    the key is claimed by that write itself, before anything else it does: a record unexpired at
    ``claim.created_at`` that holds it makes the write change nothing and raise :class:`IdempotencyKeyHeldError`.
    """

    claim: IdempotencyRecord
    result: str
    expires_at: datetime
    claiming: bool = False


class IdempotencyKeyHeldError(IdempotencyKeyInUseError):
    """A write that claims its key found it held by an earlier call, and wrote nothing; the services answer
    with that call's outcome instead (should this reach a client, it reads as the key being in use).

    Attributes:
        fingerprint: The holder's request fingerprint.
        result: The holder's stored outcome (None: its call still runs).
        token: The holder's claim token (what :meth:`IdempotencyStore.forget_idempotency_key` matches).
    """

    def __init__(self, fingerprint: str, result: str | None, token: str) -> None:
        super().__init__("the first request with this Idempotency-Key still runs; retry later")
        self.fingerprint = fingerprint
        self.result = result
        self.token = token


@dataclass
class ReadAlong:
    """Kernel reads a write sends in its own round trip, after its statements, so that a call needing both
    pays one trip; ``results`` (one per operation) is filled when the write succeeded.

    ``written`` is set once the write is stored, also should the reads then fail (on a backend where they
    are not in its transaction): the caller knows what to undo.
    """

    ops: Sequence[ReadOp]
    results: list[Any] = field(default_factory=list)
    written: bool = False


class IdempotencyStore(Protocol):
    """Idempotency keys of requests, scoped by owner (the caller)."""

    async def write_keyed(self, ops: Sequence[Op], settle: KeySettlement) -> list[Any]:
        """Run a kernel write batch (one result per operation) and store ``settle``'s idempotency key outcome with
        the records it makes, in one transaction (Redis: one script): a create answered with its record.

        Raises:
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
            IdempotencyKeyInUseError: ``settle``'s pending claim lapsed and another call took the key.
            FerrymanError: the batch's own refusal (nothing is written).
        """
        ...

    async def claim_idempotency_key(self, claim: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        """Store ``claim`` (without result) unless a record unexpired at ``now`` holds its key, atomically.

        Returns:
            None when the key was claimed, else the record that holds it.
        """
        ...

    async def renew_idempotency_key(self, claim: IdempotencyRecord, expires_at: datetime) -> bool:
        """Move the expiry of this claim's record (same token) to ``expires_at`` while it has no result.

        Returns:
            False when the record is gone or has its result (its expiry stays).
        """
        ...

    async def complete_idempotency_key(self, claim: IdempotencyRecord, result: str, expires_at: datetime) -> bool:
        """Store the outcome of the claim's call and its new expiry; False if the claim no longer holds the key."""
        ...

    async def release_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record if it has no result yet, so that a retry may run."""
        ...

    async def forget_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record (same token) whether or not it has a result: its call failed after its
        outcome was stored with the record it wrote."""
        ...


class Store(
    SessionStore,
    TurnStore,
    ResponseStore,
    IdempotencyStore,
    KnowledgeStore,
    Protocol,
):
    """Everything one backend stores."""

    @property
    def kernel(self) -> Kernel:
        """The storage kernel on the same database: the kinds moved onto it are read and written through it."""
        ...

    async def open(self) -> None:
        """Connect and apply pending migrations."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
