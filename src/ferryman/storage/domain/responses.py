"""Responses as records of the kernel: what lists a stored response and says whose it is.

A response's record is a root of kind ``response``: its id, its conversation
(indexed: a conversation's responses are a page of its own) and its creation
time, with its owner in the record's own write, so that a caller's page of
responses is filtered in the query. The response itself (its wire form as it
runs and ends, its events, its input items, the turn it ran as) is the
responses store's, under the same id, written and deleted with the record (see
:meth:`~ferryman.storage.base.ResponseStore.start_response`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.storage.base import ResponseRecord
from ferryman.storage.domain.kinds import RESPONSE
from ferryman.storage.domain.records import FieldsCodec, Records
from ferryman.storage.kernel.protocol import Kernel


@dataclass(frozen=True)
class ResponseHead:
    """A stored response as it is listed: its id, its conversation (None: none) and when it was created."""

    response_id: str
    conversation_id: str | None
    created_at: int


def head_of(record: ResponseRecord) -> ResponseHead:
    """The listing record of a stored response."""
    return ResponseHead(record.response.id, record.conversation_id, record.response.created_at)


def response_heads(kernel: Kernel) -> Records[ResponseHead]:
    """Responses' records, by id, in creation order, listed by conversation (``where=("conversation_id", ...)``)."""
    codec = FieldsCodec(ResponseHead)
    return Records(kernel, RESPONSE, codec, lambda head: head.response_id, lambda head: float(head.created_at))
