"""Launching a response's run, and what its end settles: storage, the approval inbox, its webhook and the cache.

A response runs once, as one turn of the shared engine (``host.py``); a queued one first waits its turn in
its conversation (``multitask.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ferryman.api.agents import MultitaskStrategy
from ferryman.api.content import Message
from ferryman.api.responses import Item, Response
from ferryman.auth.principal import current_principal
from ferryman.engine.channel import LiveRun
from ferryman.engine.events import Emit
from ferryman.engine.state import TurnState
from ferryman.errors import FerrymanError
from ferryman.storage.base import ResponseRecord
from ferryman.webhooks.outbox import ArmedRun

from ..approval_holds import ApprovalHolds
from ..host import RunOwner, TurnHost
from ..run_metrics import RunMetrics
from ..usage import RunUsage
from ..webhooks import RESPONSE_EVENTS
from .compaction import ConversationRead
from .history import HistoryCache
from .included import shown_response
from .multitask import ConversationQueue
from .stream import ResponseEncoder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResponseRun:
    """What the Responses API keeps of a response running in this process."""

    record: ResponseRecord
    encoder: ResponseEncoder


LiveResponse = LiveRun[ResponseRun]
"""A response running in this process: its events, its task, and the response as it stands."""

Waits = tuple[MultitaskStrategy, str, list[Message], ConversationRead | None]
"""What a queued response waits its turn with: its strategy, its conversation, its new messages, and where its
read of the conversation ends (``multitask.py``)."""


def stream(response_id: str) -> str:
    """The name of a response's event stream."""
    return f"response:{response_id}"


class ResponseRuns:
    """Launches responses' runs, and settles their ends.

    Args:
        host: Storage, the turn engine, the runner and the webhooks' outbox.
        cache: Finished responses' histories, kept as each stored response ends.
        holds: The approval inbox, told of the requests responses end with (None: no inbox).
        queue: Where a conversation's queued responses wait their turn.

    Attributes:
        session_deleted: Called with the session of a response outside a conversation once that response is
            deleted (by its run, when it is not to be stored, or by a client).
    """

    def __init__(
        self, host: TurnHost, cache: HistoryCache, holds: ApprovalHolds | None, queue: ConversationQueue
    ) -> None:
        self._host = host
        self._store = host.store
        self._engine = host.engine
        self._cache = cache
        self._holds = holds
        self._queue = queue
        self.session_deleted: list[Callable[[str], Awaitable[None]]] = []

    def launch(
        self,
        record: ResponseRecord,
        state: TurnState,
        items: list[Item],
        encoder: ResponseEncoder,
        store: bool,
        counted: RunMetrics,
        webhook: str | None = None,
        waits: Waits | None = None,
    ) -> LiveResponse:
        """Run the response in the background (``waits``: first wait its turn in this conversation, with these
        new messages, reading it again then)."""
        response_id = record.response.id
        owner = RunOwner()  # read as the run starts, when it has a webhook

        async def settle(events: list[str]) -> None:
            response = encoder.response
            done = response.status in ("completed", "incomplete")
            conversation_items = [*items, *response.output] if done else []
            if done and store and self._holds is not None:
                # Held before the response is stored as done: no client can answer its requests before then.
                await self._hold(response, record.session_id)
            await self._store.finish_response(record, events, conversation_items)
            event = RESPONSE_EVENTS.get(response.status)
            if webhook is not None and event is not None:
                shown = shown_response(response.model_copy(deep=True), None).model_dump(mode="json")
                # Its turn's owner, the response's (stamped together): a response deleted as it ran has neither.
                who = await self._host.run_owner(owner, "turn", state.record.turn_id)
                await self._host.notify(webhook, response_id, response_id, event, shown, who)
            if done and store:
                self._cache.put(response_id, state.history, record.previous_response_id)
            if not store:
                await self._store.delete_response(response_id)
                self._host.guard.deleted(current_principal.get(), "response", response_id)
                await self.session_ended(record)

        async def run(emit: Emit) -> Response:
            if waits is not None and not await self._queue.take_turn(state, *waits, emit):
                return encoder.response
            await self._engine.run(state, emit)
            return encoder.response

        launched: Callable[[Emit], Awaitable[Response]] = run
        if webhook is not None:
            reading = self._host.reading_owner(run, "turn", state.record.turn_id, owner)
            launched = self._host.armed(reading, ArmedRun(kind="response", run_id=response_id, run_key=response_id))
        return self._host.launch(
            state.record.turn_id,
            stream(response_id),
            launched,
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

    async def session_ended(self, record: ResponseRecord) -> None:
        """Run the ``session_deleted`` callbacks for a deleted response outside a conversation."""
        if record.conversation_id is None:  # a conversation's session ends with the conversation
            for callback in self.session_deleted:
                await callback(record.session_id)
