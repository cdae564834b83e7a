"""Reading responses: one response, its events, its input items, listings, and the chain a new one continues.

A response running in this process is read from its run (``runs.py``); the caller is checked against its stored
owner either way, and the store is asked either way, since it says whether the response is there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ferryman.api.content import Message
from ferryman.api.responses import Item, ListedResponse, Response
from ferryman.auth.policy import Action
from ferryman.auth.principal import current_principal
from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError
from ferryman.storage.base import ConversationRecord, Page, ResponseRecord, StoredEvent
from ferryman.storage.domain.responses import response_heads

from ..checked_records import CheckedRecords
from ..host import TurnHost
from .history import HistoryCache
from .included import shown_events, shown_items, shown_response
from .runs import LiveResponse, stream

RUNNING = ("queued", "in_progress")
"""The statuses of a response that has not ended."""


class ResponseReads:
    """Reads of responses, their events and items, and of ``previous_response_id`` chains.

    Args:
        host: Storage, its access step, and the responses' event streams.
        cache: Finished responses' histories, so that chains are not re-read.
        conversations: The conversations' records, read through the access policy.
    """

    def __init__(self, host: TurnHost, cache: HistoryCache, conversations: CheckedRecords[ConversationRecord]) -> None:
        self._host = host
        self._store = host.store
        self._guard = host.guard
        self._cache = cache
        self._conversations = conversations
        self._heads = CheckedRecords(response_heads(host.store.kernel), conversations.access)

    async def conversation(self, conversation_id: str) -> ConversationRecord:
        """A conversation the caller may read.

        Raises:
            NotFoundError: it is missing, or the caller may not read it.
        """
        return await self._conversations.get(current_principal.get(), conversation_id)

    async def record(self, response_id: str, action: Action = "read") -> ResponseRecord:
        """A stored response, once the caller may do ``action`` on it.

        Raises:
            NotFoundError: it is missing, or the caller may not read it.
            ForbiddenError: the caller may read it but not do ``action``.
        """
        await self.allowed(response_id, action)
        return await self._store.get_response(response_id)

    async def allowed(self, response_id: str, action: Action = "read") -> None:
        """Raise unless the caller may do ``action`` on the response (see :meth:`record`)."""
        await self._guard.check(current_principal.get(), action, "response", response_id)

    def live(self, response_id: str) -> LiveResponse | None:
        """The response's run, when it runs in this process."""
        return self._host.live(stream(response_id))

    async def get(self, response_id: str, include: frozenset[str] = frozenset()) -> Response:
        """A response, live or stored (checked and read either way: the caller may not see it).

        Args:
            response_id: The response.
            include: What the reader asks to see of its output (``included.py``).
        """
        stored = await self.record(response_id)
        live = self.live(response_id)
        if live is not None:
            return shown_response(live.subject.encoder.response.model_copy(deep=True), include)
        return shown_response(stored.response, include)

    async def replay(
        self, response_id: str, starting_after: int, include: frozenset[str] = frozenset()
    ) -> AsyncIterator[StoredEvent]:
        """The stream events after ``starting_after``, then live ones until the response ends (see
        ``ResponsesService.replay``)."""
        record = await self.record(response_id)  # also when live: the caller may not see it
        if self.live(response_id) is None and record.response.status not in RUNNING:
            # A run stores its final state and its events together; a replica failing a dead one's
            # response stores the state first and the events a moment later: until then, they are
            # read from the dead replica's stream.
            stored = await self._store.events_after(response_id, starting_after)
            if stored:
                return shown_events(_iterate(stored), include)
        return shown_events(await self.events(response_id, starting_after), include)

    async def events(self, response_id: str, after: int) -> AsyncIterator[StoredEvent]:
        """The response's events numbered above ``after``, as stored, then live ones until it ends."""

        async def stored_after(last: int) -> list[StoredEvent]:
            return await self._store.events_after(response_id, last)

        async def is_running() -> bool:
            # The turn's status too: a response whose final state failed to be stored would
            # otherwise look as if it ran forever.
            try:
                record = await self._store.get_response(response_id)
                if record.response.status not in RUNNING:
                    return False
                turn = await self._store.get_turn_record(record.session_id, record.turn_id)
                return turn.status in ("in_progress", "queued")
            except NotFoundError:  # deleted while followed: its stream just ends
                return False

        return await self._host.events(stream(response_id), after, stored_after, is_running)

    async def input_items(
        self, response_id: str, after: str | None, limit: int, order: str, include: frozenset[str] = frozenset()
    ) -> Page[Item]:
        """A page of a response's input items, as a reader asking for ``include`` sees them."""
        await self.record(response_id)
        page = await self._store.list_items(response_id, after, limit, order)
        return Page(shown_items(page.items, include), page.has_more)

    async def chain(self, previous_id: str) -> list[Message]:
        """The history a response continuing ``previous_id`` reads: that response's, which must have ended well.

        Raises:
            ConflictError: the response is still running.
            InvalidRequestError: it failed, or was cancelled.
        """
        status = (await self.get(previous_id)).status
        if status in ("queued", "in_progress"):
            raise ConflictError(f"response '{previous_id}' is still in progress; continue it once it is done")
        if status not in ("completed", "incomplete"):
            raise InvalidRequestError(f"response '{previous_id}' ended {status}; it cannot be continued", "input")
        cached = self._cache.get(previous_id)
        return cached if cached is not None else await self._store.chain_history(previous_id)

    async def chain_items(self, previous_id: str | None) -> list[Item]:
        """The items of a ``previous_response_id`` chain, oldest first: each response's input and output."""
        items: list[Item] = []
        while previous_id is not None:
            try:
                record = await self.record(previous_id)
            except NotFoundError:  # the chain stops at a deleted response, as its history does
                break
            items = [*await self._store.all_items(previous_id), *record.response.output, *items]
            previous_id = record.previous_response_id
        return items

    async def root(self, previous_id: str | None, session_id: str) -> str:
        """The session of a chain's first response (still stored), or ``session_id`` when there is no chain."""
        root = session_id
        while previous_id is not None:
            try:
                record = await self.record(previous_id)
            except NotFoundError:  # the chain stops at a deleted response, as its history does
                break
            root, previous_id = record.session_id, record.previous_response_id
        return root

    async def list(
        self, after: str | None, limit: int, order: str, conversation_id: str | None = None
    ) -> Page[ListedResponse]:
        """A page of stored responses (of one conversation, if given), each with its input items.

        Raises:
            NotFoundError: the conversation is missing, or the caller may not read it.
        """
        who = current_principal.get()
        if conversation_id is not None:
            await self.conversation(conversation_id)
        where = None if conversation_id is None else ("conversation_id", conversation_id)
        page = await self._heads.page(who, after, limit, order, where)
        # The page holds only what the caller may read.
        records = await self._store.responses_by_id([head.response_id for head in page.items])
        inputs = await self._store.items_of([record.response.id for record in records])
        listed = []
        for record in records:
            response_inputs = inputs.get(record.response.id, [])
            response = ListedResponse.model_validate({**dict(record.response), "input": response_inputs})
            listed.append(shown_response(response, None))
        return Page(listed, page.has_more)


async def _iterate(events: list[StoredEvent]) -> AsyncIterator[StoredEvent]:
    for event in events:
        yield event
