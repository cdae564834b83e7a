"""Llama Stack's RAG query: search vector DBs and lay the chunks out as text for a model.

Shared by the ``/tool-runtime/rag-tool/query`` route and the ``builtin::rag``
``knowledge_search`` tool, so both answer alike: the text lists each chunk
(``chunk_template``) between BEGIN/END markers, and the metadata carries the
chunks' ``document_ids``, texts (``chunks``) and ``scores``.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from ferryman.api.content import TextContentItem
from ferryman.api.vector_io import RAGQueryConfig, RAGQueryResult
from ferryman.errors import InvalidRequestError

from .results import SearchOutcome, SearchQuery, SearchResult

_PLACEHOLDER = re.compile(r"\{index\}|\{chunk\.content\}|\{metadata\}")
_CHARS_PER_TOKEN = 4
"""The estimate of a chunk's tokens when its metadata does not say (Llama Stack reads ``token_count``)."""


class Searcher(Protocol):
    """What runs a search (``SearchService``): checks each store is readable by the caller."""

    async def search(self, query: SearchQuery) -> SearchOutcome:
        """The best chunks for the query across its vector stores."""
        ...


def document_id_of(result: SearchResult) -> str:
    """The document a chunk came from: its ``document_id`` metadata, else its file."""
    named = result.metadata.get("document_id")
    return named if isinstance(named, str) and named else result.file_id


def chunk_metadata(result: SearchResult) -> dict[str, Any]:
    """A chunk's metadata as Llama Stack shows it: what was inserted, with ``document_id``."""
    return {**result.metadata, "document_id": document_id_of(result)}


async def rag_query(searcher: Searcher, query: str, vector_db_ids: list[str], config: RAGQueryConfig) -> RAGQueryResult:
    """Search the vector DBs for ``query`` and format the best chunks within the config's budget.

    Raises:
        InvalidRequestError: no vector DB was named.
        NotFoundError: a vector DB does not exist or the caller may not read it.
    """
    if not vector_db_ids:
        raise InvalidRequestError("knowledge search needs at least one vector DB id", "vector_db_ids")
    outcome = await searcher.search(
        SearchQuery(
            vector_store_ids=list(vector_db_ids),
            query=query,
            max_num_results=config.max_chunks,
            mode=config.mode or "vector",
        )
    )
    picked = _within_budget(outcome.results[: config.max_chunks], config.max_tokens_in_context)
    if not picked:
        return RAGQueryResult(content=None, metadata={"document_ids": [], "chunks": [], "scores": []})
    content = [
        TextContentItem(
            text=f"knowledge_search tool found {len(picked)} chunks:\nBEGIN of knowledge_search tool results.\n"
        )
    ]
    content += [
        TextContentItem(text=_render(config.chunk_template, index, result)) for index, result in enumerate(picked, 1)
    ]
    content.append(TextContentItem(text="END of knowledge_search tool results.\n"))
    content.append(
        TextContentItem(
            text=f'The above results were retrieved to help answer the user\'s query: "{query}". '
            "Use them as supporting information only in answering this query.\n"
        )
    )
    metadata = {
        "document_ids": [document_id_of(r) for r in picked],
        "chunks": [r.text for r in picked],
        "scores": [r.score for r in picked],
    }
    return RAGQueryResult(content=list(content), metadata=metadata)


def _within_budget(results: list[SearchResult], max_tokens: int) -> list[SearchResult]:
    kept: list[SearchResult] = []
    spent = 0
    for result in results:
        spent += _tokens(result)
        if spent > max_tokens:
            break
        kept.append(result)
    return kept


def _tokens(result: SearchResult) -> int:
    counted = result.metadata.get("token_count")
    if isinstance(counted, int) and counted > 0:
        return counted
    return max(1, len(result.text) // _CHARS_PER_TOKEN)


def _render(template: str, index: int, result: SearchResult) -> str:
    # Only the three documented placeholders are filled: ``str.format`` on a client's template
    # would let it read any attribute reachable from the values it is given.
    shown = {k: v for k, v in chunk_metadata(result).items() if k not in ("token_count", "metadata_token_count")}
    values = {"{index}": str(index), "{chunk.content}": result.text, "{metadata}": str(shown)}
    return _PLACEHOLDER.sub(lambda match: values[match.group(0)], template)
