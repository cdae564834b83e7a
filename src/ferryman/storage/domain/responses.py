"""Responses as records of the kernel: what lists a stored response and says whose it is.

A response's record is a root of kind ``response``: its id, its conversation
(indexed: a conversation's responses are a page of its own) and its creation
time, with its owner in the record's own write, so that a caller's page of
responses is filtered in the query. Its ``events`` log keeps the stream's events
once the response ended (:func:`events_written`, read by
:class:`ResponseEvents`), and its input items are records under it
(:mod:`.items`). The response itself (its wire form as it runs and ends, the
turn it ran as) is the responses store's, under the same id, written and deleted
with the record (see :meth:`~ferryman.storage.base.ResponseStore.start_response`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ferryman.storage.base import ResponseRecord, StoredEvent
from ferryman.storage.domain.kinds import RESPONSE
from ferryman.storage.domain.records import FieldsCodec, HasKernel, Records
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.protocol import Kernel

EVENTS = "events"
"""The log of a response's record that holds its stream's events."""


@dataclass(frozen=True)
class ResponseHead:
    """A stored response as it is listed: its id, its conversation (None: none) and when it was created."""

    response_id: str
    conversation_id: str | None
    created_at: int


def head_of(record: ResponseRecord) -> ResponseHead:
    """The listing record of a stored response."""
    return ResponseHead(record.response.id, record.conversation_id, record.response.created_at)


def events_written(response_id: str, events: Sequence[str]) -> ops.Rewrite:
    """The write storing a finished response's events (their JSON data, numbered from 0) in its record's log."""
    return ops.Rewrite(RESPONSE, response_id, EVENTS, tuple(events))


class ResponseEvents:
    """The read of a response's stored events over a store's kernel (a base of each backend's store)."""

    async def events_after(self: HasKernel, response_id: str, after: int) -> list[StoredEvent]:
        """A response's stored events numbered above ``after`` (none for a missing response)."""
        (entries,) = await self.kernel.read([ops.Events(RESPONSE, response_id, EVENTS, after)])
        return [StoredEvent(entry.n, entry.body) for entry in entries]


def response_heads(kernel: Kernel) -> Records[ResponseHead]:
    """Responses' records, by id, in creation order, listed by conversation (``where=("conversation_id", ...)``)."""
    codec = FieldsCodec(ResponseHead)
    return Records(kernel, RESPONSE, codec, lambda head: head.response_id, lambda head: float(head.created_at))
