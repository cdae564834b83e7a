"""A session's own vector store: where a turn's large documents are indexed and searched.

It implements the engine's :class:`~ferryman.engine.memory.Retriever`. The store
is created on the first turn that needs it, as the turn's caller (so it is
owned like the session), and deleted with the session.
"""

from __future__ import annotations

from ferryman.api.limits import MAX_SEARCH_QUERY_CHARS
from ferryman.api.vector_stores import CreateVectorStoreRequest
from ferryman.auth.principal import acting_as
from ferryman.engine.memory import MemoryDocument, Recollection
from ferryman.errors import ConflictError, NotFoundError
from ferryman.knowledge.rag import Searcher, document_id_of
from ferryman.knowledge.results import SearchQuery

from .vector_stores import VectorStoreService

CHUNK_TOKENS = 256
MAX_CHUNKS = 4
"""At most about 1,000 tokens of context: well under the size above which documents are not inlined."""
SESSION_STORE_PREFIX = "vs_session_"


def session_store_id(session_id: str) -> str:
    """The id of a session's own vector store."""
    return f"{SESSION_STORE_PREFIX}{session_id}"


class SessionMemory:
    """Indexes turns' documents in their session's vector store and retrieves context from it.

    Args:
        vector_stores: Creates the session's store (with the default embedding model), chunks and embeds.
        search: Finds the best chunks.
    """

    def __init__(self, vector_stores: VectorStoreService, search: Searcher) -> None:
        self._vector_stores = vector_stores
        self._search = search

    async def recall(self, session_id: str, documents: list[MemoryDocument], query: str) -> Recollection:
        """Index the documents in the session's store, then find the chunks that best match ``query``."""
        store_id = await self._session_store(session_id)
        texts = [(d.document_id, d.text, dict(d.metadata)) for d in documents]
        await self._vector_stores.insert_texts(store_id, texts, CHUNK_TOKENS)
        # The user's message may be far longer than a search query may be: its start stands for it.
        query = query[:MAX_SEARCH_QUERY_CHARS]
        if not query.strip():
            return Recollection(store_id, "")
        outcome = await self._search.search(
            SearchQuery(vector_store_ids=[store_id], query=query, max_num_results=MAX_CHUNKS)
        )
        blocks = [f"[retrieved from document {document_id_of(r)}]\n{r.text}" for r in outcome.results]
        return Recollection(store_id, "\n\n".join(blocks))

    async def forget(self, session_id: str) -> None:
        """Delete the session's store, if it has one.

        As the server: the caller's right to delete the session was checked already, and a session that
        never needed a store must not leave a denied delete of one in the audit trail.
        """
        try:
            with acting_as(None):
                await self._vector_stores.delete(session_store_id(session_id))
        except NotFoundError:
            pass  # the session never needed one

    async def _session_store(self, session_id: str) -> str:
        store_id = session_store_id(session_id)
        try:
            await self._vector_stores.record(store_id)
            return store_id
        except NotFoundError:
            pass  # its first large documents: create it below
        body = CreateVectorStoreRequest(name=f"session {session_id}", metadata={"session_id": session_id})
        try:
            await self._vector_stores.created(body, store_id)
        except ConflictError:
            pass  # a concurrent turn of the session created it
        return store_id
