"""The memory_retrieval step: a turn's large documents, indexed and searched instead of inlined.

Documents too large for the prompt are indexed in the session's own vector
store; before the first inference the chunks best matching the user's message
are retrieved and given to the model as the message's context, the way small
documents are given whole. The engine reaches storage and embeddings only
through the :class:`Retriever` protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ferryman.api.agents import MemoryRetrievalStep, Step
from ferryman.api.content import Message, TurnInputMessage, UserMessage, content_to_text


@dataclass(frozen=True)
class MemoryDocument:
    """A document of a turn to index: its id, text and metadata."""

    document_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Recollection:
    """What a retrieval found: the vector store searched and the context for the model."""

    vector_db_id: str
    context: str


class Retriever(Protocol):
    """Indexes a session's documents and retrieves from them (the knowledge services)."""

    async def recall(self, session_id: str, documents: list[MemoryDocument], query: str) -> Recollection:
        """Index ``documents`` in the session's vector store, then retrieve the best context for ``query``."""
        ...


def user_query(history: list[Message]) -> str:
    """The text of the turn's user message (the last one in the history)."""
    for message in reversed(history):
        if isinstance(message, UserMessage):
            return content_to_text(message.content)
    return ""


MessageT = TypeVar("MessageT", Message, TurnInputMessage)


def with_context(history: list[MessageT], context: str) -> list[MessageT]:
    """The messages with ``context`` joined to the last user message's context (unchanged if there is none)."""
    result = list(history)
    for index in range(len(result) - 1, -1, -1):
        message = result[index]
        if isinstance(message, UserMessage):
            before = content_to_text(message.context) if message.context is not None else ""
            joined = f"{before}\n\n{context}" if before else context
            result[index] = message.model_copy(update={"context": joined})
            return result
    return result


def recalled_context(history: list[Message], steps: list[Step]) -> list[Message]:
    """The history of a resumed turn with what its memory_retrieval step retrieved put back in place.

    The context is given to the model, not stored in the session's history: a
    turn that pauses and resumes gets it again from its stored step.
    """
    for step in steps:
        if isinstance(step, MemoryRetrievalStep):
            history = with_context(history, content_to_text(step.inserted_context))
    return history
