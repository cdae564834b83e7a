"""``file_search`` on the Responses API: the search of vector stores, and its ``file_search_call`` items."""

from __future__ import annotations

from typing import Any

from ferryman.api.content import ToolCall, ToolResponse
from ferryman.api.response_events import FileSearchCallCompleted, FileSearchCallInProgress, FileSearchCallSearching
from ferryman.api.responses import (
    FileSearchCallItem,
    FileSearchResult,
    FileSearchTool,
    HostedCallItem,
    HostedTool,
)
from ferryman.engine.approvals import ApprovalPolicy
from ferryman.errors import InvalidRequestError
from ferryman.knowledge.filters import parse_filter
from ferryman.knowledge.rag import Searcher
from ferryman.knowledge.results import RankingOptions, SearchQuery, SearchResult
from ferryman.knowledge.search import StoreRecords, search_mode
from ferryman.tools.file_search import METADATA_KEY, TOOL_NAME, FileSearch, render
from ferryman.tools.registry import BoundTool

from ..citations import Source, Sources
from .base import BindContext, Binding, Progress, Replayed, failed, replayed_call


class FileSearchRenderer:
    """A search call is an item in progress while it runs, and keeps the passages it found.

    The item always holds them, so that a later response in the conversation gives the model
    what it read; a reader sees them only when its ``include`` asks (``included.py``).
    """

    item_type = "file_search_call"

    def started(self, call: ToolCall, item_id: str) -> tuple[HostedCallItem, list[Progress]]:
        """An item in progress, with its query."""
        query = call.arguments.get("query") if isinstance(call.arguments, dict) else None
        item = FileSearchCallItem(id=item_id, status="in_progress", queries=[query] if isinstance(query, str) else [])
        return item, [(FileSearchCallInProgress, {}), (FileSearchCallSearching, {})]

    def finished(
        self, item: HostedCallItem, response: ToolResponse, sources: Sources
    ) -> tuple[HostedCallItem, list[Progress]]:
        """The search's outcome; the files it found become the answer's sources."""
        assert isinstance(item, FileSearchCallItem)
        found = (response.metadata or {}).get(METADATA_KEY)
        if not found:
            status = "failed" if failed(response) else "incomplete"
            return item.model_copy(update={"status": status}), []
        results = [FileSearchResult.model_validate(r) for r in found["results"]]
        sources.add_search([Source(file_id=r.file_id, filename=r.filename) for r in results])
        return item.model_copy(update={"status": "completed", "results": results}), [(FileSearchCallCompleted, {})]


def replay_call(item: FileSearchCallItem) -> Replayed:
    """A search as the model read it: its passages as ``file_search`` renders them, when the item holds them
    (a client may send one back without), else what was searched for, so a later turn knows it ran and can search again.
    """
    query = " ".join(item.queries)
    call = replayed_call(item.id, item.type, TOOL_NAME, {"query": query})
    if item.results is not None:
        found = [SearchResult("", r.file_id, r.filename, "", r.text, r.score, dict(r.attributes)) for r in item.results]
        return Replayed(call, render(query, found))
    if item.status != "completed":
        return Replayed(call, f"file_search for {query!r} ended {item.status}: it found nothing to answer from.")
    return Replayed(call, f"file_search ran for {query!r}; its passages were not kept. Search again to read them.")


class FileSearchKind:
    """The request's ``file_search`` tool: at most one, over vector stores the caller may read.

    Args:
        searcher: The search of vector stores (it checks the caller may read each).
        stores: The vector stores' records (reading one checks the caller may).
    """

    names = frozenset({TOOL_NAME})
    uses_prior = False

    def __init__(self, searcher: Searcher, stores: StoreRecords) -> None:
        self._searcher = searcher
        self._stores = stores

    def validate(self, tools: list[HostedTool]) -> None:
        """At most one ``file_search`` tool."""
        if len(tools) > 1:
            raise InvalidRequestError("at most one file_search tool per response", "tools")

    async def check(self, tools: list[HostedTool]) -> None:
        """A search the turn could not run fails the request, not the turn.

        Raises:
            InvalidRequestError: an unknown ranker, or a malformed filter.
            NotFoundError: a vector store does not exist, or the caller may not read it.
        """
        for tool in tools:
            assert isinstance(tool, FileSearchTool)
            ranker = (tool.ranking_options.ranker if tool.ranking_options else None) or "auto"
            search_mode(SearchQuery(tool.vector_store_ids, "", ranking=RankingOptions(ranker=ranker)))
            if tool.filters is not None:
                parse_filter(tool.filters)
            for vector_store_id in tool.vector_store_ids:
                await self._stores.record(vector_store_id)

    async def bind(self, tools: list[HostedTool], context: BindContext) -> Binding:
        """The search as the model may call it: everything but the query is the request's."""
        binding = Binding()
        renderer = FileSearchRenderer()
        for tool in tools:
            assert isinstance(tool, FileSearchTool)
            ranking = tool.ranking_options
            args: dict[str, Any] = {
                "vector_store_ids": list(tool.vector_store_ids),
                "max_num_results": tool.max_num_results,
                "filters": tool.filters,
                "ranking_options": ranking.model_dump(exclude_none=True) if ranking else None,
            }
            binding.add(TOOL_NAME, BoundTool(FileSearch(self._searcher), args), renderer)
            if ApprovalPolicy.of(tool.require_approval).requires(TOOL_NAME):
                binding.held[TOOL_NAME] = None
        return binding
