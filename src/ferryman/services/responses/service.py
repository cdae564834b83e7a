"""The Responses API's operations: each response runs as one turn of the shared engine.

The service holds compaction requests itself; starting a response (``starts.py``), its run and what its end
settles (``runs.py``), reading responses and their chains (``reads.py``), and cancelling, deleting and closing
those a dead replica left (``stops.py``) are its collaborators'.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ferryman.api.content import Message
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
from ferryman.engine.context_fit import since_last_summary
from ferryman.engine.summary import summarize
from ferryman.errors import InvalidRequestError
from ferryman.inference.router import ModelRouter
from ferryman.safety.base import ShieldRegistry
from ferryman.storage.base import ConversationRecord, Page, StoredEvent

from ..approval_holds import ApprovalHolds
from ..checked_records import CheckedRecords
from ..host import TurnHost
from ..idempotency import Claim
from .compaction import Sealing, compacted, user_messages
from .history import HistoryCache
from .hosted.table import HostedTools
from .items import input_items, items_to_messages, read_window, with_ids
from .multitask import ConversationQueue
from .reads import ResponseReads
from .runs import LiveResponse, ResponseRun, ResponseRuns, stream
from .starts import ResponseStarts
from .stops import ResponseStops

__all__ = ["LiveResponse", "ResponseRun", "ResponsesService"]


class ResponsesService:
    """Create, read, replay, cancel, list and delete responses.

    Args:
        host: Storage, the turn engine, the runner, leases and the fan-out (the same as the Agents API's).
        models: The model router, to check the model exists.
        cache: Finished responses' histories, so that chains are not re-read.
        hosted: The hosted tools offered (``file_search``, ``mcp``, ``code_interpreter``, ``web_search``).
        conversations: The conversations' records, read through the access policy.
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
        conversations: CheckedRecords[ConversationRecord],
        shields: ShieldRegistry | None = None,
        holds: ApprovalHolds | None = None,
        context: ContextSettings | None = None,
    ) -> None:
        self._models = models
        self._cache = cache
        context = context or ContextSettings()
        self._sealing = Sealing(context.key(), host.store.kernel)
        self._summary_model = context.summary_model
        self._reads = ResponseReads(host, cache, conversations)
        queue = ConversationQueue(host, self._sealing, stream)
        self._runs = ResponseRuns(host, cache, holds, queue)
        shields = shields or ShieldRegistry()
        self._starts = ResponseStarts(
            host, models, hosted, shields, holds, self._sealing, self._reads, queue, self._runs
        )
        self._stops = ResponseStops(host, cache, holds, self._reads, self._runs)
        host.on_abandoned(lambda turn: turn.response_id is not None, self._stops.close_abandoned)
        if host.webhooks is not None:
            host.webhooks.recoverers["response"] = self._stops.recover_end

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
        return await self._starts.create(request, provider_data, continued, acting_since, replayed_by)

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
            history = await self._reads.chain(request.previous_response_id)
            earlier = await self._sealing.opened(await self._reads.chain_items(request.previous_response_id))
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

    async def get(self, response_id: str, include: frozenset[str] = frozenset()) -> Response:
        """A response, live or stored (the store is asked either way: it says whether the caller may see it).

        Args:
            response_id: The response.
            include: What the reader asks to see of its output (``included.py``).
        """
        return await self._reads.get(response_id, include)

    async def replay(
        self, response_id: str, starting_after: int, include: frozenset[str] = frozenset()
    ) -> AsyncIterator[StoredEvent]:
        """The stream events after ``starting_after``, then live ones until the response ends.

        Args:
            response_id: The response.
            starting_after: The number of the last event the reader has (-1: none).
            include: What the reader asks to see of the items the events hold (``included.py``).
        """
        return await self._reads.replay(response_id, starting_after, include)

    async def cancel(self, response_id: str) -> Response:
        """Cancel a background response; cancelling a finished one changes nothing."""
        return await self._stops.cancel(response_id)

    async def delete(self, response_id: str) -> None:
        """Delete a response (cancelling it first if it still runs)."""
        await self._stops.delete(response_id)

    def on_session_deleted(self, callback: Callable[[str], Awaitable[None]]) -> None:
        """Have ``callback(session_id)`` run when a response outside a conversation is deleted.

        What is kept under that session (a code interpreter's container, which a
        ``previous_response_id`` chain keeps under its first response's session) goes with it.
        """
        self._runs.session_deleted.append(callback)

    def forget(self, response_id: str | None) -> None:
        """Drop what this replica cached of a deleted response (None: of every response)."""
        self._cache.drop(response_id)

    async def input_items(
        self, response_id: str, after: str | None, limit: int, order: str, include: frozenset[str] = frozenset()
    ) -> Page[Item]:
        """A page of a response's input items, as a reader asking for ``include`` sees them."""
        return await self._reads.input_items(response_id, after, limit, order, include)

    async def list(
        self, after: str | None, limit: int, order: str, conversation_id: str | None = None
    ) -> Page[ListedResponse]:
        """A page of stored responses (of one conversation, if given), each with its input items.

        A listing takes no ``include``.

        Raises:
            NotFoundError: the conversation is missing, or the caller may not read it.
        """
        return await self._reads.list(after, limit, order, conversation_id)
