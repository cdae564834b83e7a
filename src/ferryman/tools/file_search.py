"""``file_search``: the server-side search of vector stores, as a tool a model calls with a query.

The caller binds where and how to search (``vector_store_ids``, ``max_num_results``,
``filters``, ``ranking_options``); the model chooses only the ``query``. The model
reads the passages found as the tool's output, each numbered so that it can cite
it as ``[n]``; the same passages go, structured, into the result's ``metadata``
under :data:`METADATA_KEY` for the API that shows them (the Responses API's
``file_search_call`` item).
"""

from __future__ import annotations

from typing import Any

from ferryman.api.content import ToolParameter
from ferryman.api.registry import Tool, ToolInvocationResult
from ferryman.errors import FerrymanError
from ferryman.knowledge.rag import Searcher
from ferryman.knowledge.results import RankingOptions, SearchQuery, SearchResult

TOOL_NAME = "file_search"
TOOLGROUP_ID = "builtin::file_search"
METADATA_KEY = "file_search"
"""Where a result's ``metadata`` holds ``{"queries": [...], "results": [...]}``."""
DEFAULT_MAX_RESULTS = 10


_DEFINITION = Tool(
    identifier=TOOL_NAME,
    toolgroup_id=TOOLGROUP_ID,
    description=(
        "Search the uploaded files for passages relevant to a query. "
        "Use it to answer questions about their content, and cite the passages you use."
    ),
    parameters=[
        ToolParameter(name="query", parameter_type="string", description="What to look for", required=True),
        ToolParameter(name="vector_store_ids", parameter_type="array", description="The vector stores"),
        ToolParameter(
            name="max_num_results",
            parameter_type="integer",
            description="At most this many passages (1 to 50)",
            required=False,
            default=DEFAULT_MAX_RESULTS,
        ),
        ToolParameter(name="filters", parameter_type="object", description="File attribute filter", required=False),
        ToolParameter(
            name="ranking_options",
            parameter_type="object",
            description="ranker, score_threshold",
            required=False,
        ),
    ],
)


class FileSearch:
    """The ``file_search`` tool.

    Args:
        searcher: The search service, which checks that the caller may read each vector store.
    """

    def __init__(self, searcher: Searcher) -> None:
        self._searcher = searcher

    @property
    def definition(self) -> Tool:
        """The tool's listing; every parameter but ``query`` is bound by whoever offers the tool."""
        return _DEFINITION

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Search; a bad argument or a store that cannot be searched is an error result, not an exception."""
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolInvocationResult(error_message="missing string argument 'query'", error_code=400)
        try:
            search = search_query(query, arguments)
        except (TypeError, ValueError) as exc:
            return ToolInvocationResult(error_message=f"invalid file_search arguments: {exc}", error_code=400)
        try:
            outcome = await self._searcher.search(search)
        except FerrymanError as exc:
            return ToolInvocationResult(error_message=exc.message)
        return ToolInvocationResult(
            content=render(query, outcome.results),
            metadata={METADATA_KEY: {"queries": [query], "results": [_result_json(r) for r in outcome.results]}},
        )


def search_query(query: str, arguments: dict[str, Any]) -> SearchQuery:
    """The search a call runs: the model's query with the bound arguments.

    Raises:
        TypeError: a bound argument has the wrong shape.
        ValueError: a number is not one.
    """
    ids = arguments.get("vector_store_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise TypeError("vector_store_ids must be a non-empty list of ids")
    ranking = arguments.get("ranking_options") or {}
    if not isinstance(ranking, dict):
        raise TypeError("ranking_options must be an object")
    filters = arguments.get("filters")
    if filters is not None and not isinstance(filters, dict):
        raise TypeError("filters must be an object")
    return SearchQuery(
        vector_store_ids=list(ids),
        query=query,
        max_num_results=int(arguments.get("max_num_results") or DEFAULT_MAX_RESULTS),
        filters=filters,
        ranking=RankingOptions(
            ranker=str(ranking.get("ranker") or "auto"),
            score_threshold=float(ranking.get("score_threshold") or 0.0),
        ),
    )


def _result_json(result: SearchResult) -> dict[str, Any]:
    return {
        "file_id": result.file_id,
        "filename": result.filename,
        "score": result.score,
        "text": result.text,
        "attributes": dict(result.attributes),
    }


def render(query: str, results: list[SearchResult]) -> str:
    """The tool's output for the model: the passages, numbered from 1, and how to cite them."""
    if not results:
        return f"file_search found no passage for {query!r}. Say that the files do not answer it."
    lines = [
        f"file_search found {len(results)} passage(s) for {query!r}. Answer from them and cite each passage "
        "you use by its number in square brackets, e.g. [1], right after the sentence it supports.",
    ]
    for number, result in enumerate(results, start=1):
        lines.append(f"\n[{number}] {result.filename} (file {result.file_id}, score {result.score:.3f})")
        lines.append(result.text)
    return "\n".join(lines)
