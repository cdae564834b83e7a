"""Web search for the model: the ``builtin::websearch`` toolgroup over Brave, Tavily or SearXNG."""

from .providers import BraveSearch, SearchFailed, SearchProvider, SearxngSearch, TavilySearch, WebResult
from .tool import TOOL_NAME, TOOLGROUP_ID, WebSearch

__all__ = [
    "TOOLGROUP_ID",
    "TOOL_NAME",
    "BraveSearch",
    "SearchFailed",
    "SearchProvider",
    "SearxngSearch",
    "TavilySearch",
    "WebResult",
    "WebSearch",
]
