"""The ``builtin::rag`` toolgroup's ``knowledge_search`` tool: searching vector DBs for the model.

As in Llama Stack, the model chooses only the ``query``; the agent binds the
vector DBs in its toolgroup reference
(``{"name": "builtin::rag/knowledge_search", "args": {"vector_db_ids": [...]}}``),
and may bind a ``query_config``. The search runs as the turn's caller (the turn
task inherits the request's principal), so a vector DB the caller may not read
answers as missing.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ferryman.api.content import ToolParameter
from ferryman.api.registry import Tool, ToolInvocationResult
from ferryman.api.vector_io import RAGQueryConfig
from ferryman.errors import FerrymanError
from ferryman.knowledge.rag import Searcher, rag_query

TOOLGROUP_ID = "builtin::rag"

_DEFINITION = Tool(
    identifier="knowledge_search",
    toolgroup_id=TOOLGROUP_ID,
    description="Search for information in a database.",
    parameters=[
        ToolParameter(
            name="query",
            parameter_type="string",
            description="The query to search for. Can be a natural language sentence or keywords.",
        )
    ],
)


class KnowledgeSearch:
    """Searches the vector DBs its toolgroup reference binds.

    Args:
        search: Runs the search as the current caller.
    """

    def __init__(self, search: Searcher) -> None:
        self._search = search

    @property
    def definition(self) -> Tool:
        """Name, description and the model's one parameter, ``query``."""
        return _DEFINITION

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Search; a bad argument or an unknown vector DB is an error result for the model."""
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolInvocationResult(error_message="knowledge_search needs a non-empty 'query' string")
        vector_db_ids = arguments.get("vector_db_ids")
        if not isinstance(vector_db_ids, list) or not all(isinstance(i, str) for i in vector_db_ids):
            return ToolInvocationResult(
                error_message="knowledge_search needs 'vector_db_ids' (a list of ids) bound in the toolgroup's args"
            )
        try:
            config = RAGQueryConfig.model_validate(arguments.get("query_config") or {})
            result = await rag_query(self._search, query, vector_db_ids, config)
        except ValidationError as exc:
            return ToolInvocationResult(error_message=f"bad query_config: {exc.errors(include_url=False)[0]['msg']}")
        except FerrymanError as exc:
            return ToolInvocationResult(error_message=exc.message)
        return ToolInvocationResult(content=result.content, metadata=result.metadata)
