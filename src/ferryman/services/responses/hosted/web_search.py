"""``web_search`` on the Responses API: the configured search provider, ``web_search_call`` items, URL citations."""

from __future__ import annotations

from ferryman.api.content import ToolCall, ToolResponse
from ferryman.api.response_events import WebSearchCallCompleted, WebSearchCallInProgress, WebSearchCallSearching
from ferryman.api.responses import HostedCallItem, HostedTool, WebSearchAction, WebSearchCallItem, WebSearchTool
from ferryman.engine.approvals import ApprovalPolicy
from ferryman.errors import InvalidRequestError
from ferryman.tools.registry import BoundTool
from ferryman.tools.websearch import TOOL_NAME, WebSearch

from ..citations import Source, Sources
from .base import BindContext, Binding, Progress, Replayed, failed, replayed_call


class WebSearchRenderer:
    """A search of the web: its query, then the pages found, which the answer cites as ``url_citation``."""

    item_type = "web_search_call"

    def started(self, call: ToolCall, item_id: str) -> tuple[HostedCallItem, list[Progress]]:
        """An item in progress with the model's query, then searching."""
        query = call.arguments.get("query") if isinstance(call.arguments, dict) else None
        action = WebSearchAction(query=query if isinstance(query, str) else None)
        item = WebSearchCallItem(id=item_id, status="in_progress", action=action)
        return item, [(WebSearchCallInProgress, {}), (WebSearchCallSearching, {})]

    def finished(
        self, item: HostedCallItem, response: ToolResponse, sources: Sources
    ) -> tuple[HostedCallItem, list[Progress]]:
        """The search's outcome; the pages found become the answer's sources, numbered as the model read them."""
        assert isinstance(item, WebSearchCallItem)
        if failed(response):
            return item.model_copy(update={"status": "failed"}), []
        results = [r for r in (response.metadata or {}).get("results") or [] if isinstance(r, dict) and r.get("url")]
        pages = [Source(url=str(r["url"]), title=str(r.get("title") or "")) for r in results]
        sources.add_search(pages)
        action = item.action.model_copy(update={"sources": [{"type": "url", "url": page.url} for page in pages]})
        return item.model_copy(update={"status": "completed", "action": action}), [(WebSearchCallCompleted, {})]


def replay_call(item: WebSearchCallItem) -> Replayed:
    """A search as the model read it: the query and the pages found (their text is not kept: search again)."""
    query = item.action.query or ""
    call = replayed_call(item.id, item.type, TOOL_NAME, {"query": query})
    urls = [str(source.get("url")) for source in item.action.sources or [] if source.get("url")]
    if item.status != "completed":
        return Replayed(call, f"web_search for {query!r} ended {item.status}: it found nothing.")
    if not urls:
        return Replayed(call, f"web_search for {query!r} found no pages.")
    listing = "\n".join(f"[{number}] {url}" for number, url in enumerate(urls, 1))
    return Replayed(call, f"web_search for {query!r} found these pages (their text was not kept):\n{listing}")


class WebSearchKind:
    """The request's ``web_search`` (or ``web_search_preview``) tool, searched by the server's provider.

    Args:
        search: The web search tool (its provider and key are the server's, or the request's provider data).
    """

    names = frozenset({TOOL_NAME})
    uses_prior = False

    def __init__(self, search: WebSearch) -> None:
        self._search = search

    def validate(self, tools: list[HostedTool]) -> None:
        """At most one ``web_search`` tool."""
        if len(tools) > 1:
            raise InvalidRequestError("at most one web_search tool per response", "tools")

    async def check(self, tools: list[HostedTool]) -> None:
        """Nothing to check: an unconfigured provider is a failed search the model is told about."""

    async def bind(self, tools: list[HostedTool], context: BindContext) -> Binding:
        """The search, as the model calls it with a query."""
        binding = Binding()
        for tool in tools:
            assert isinstance(tool, WebSearchTool)
            binding.add(TOOL_NAME, BoundTool(self._search), WebSearchRenderer())
            if ApprovalPolicy.of(tool.require_approval).requires(TOOL_NAME):
                binding.held[TOOL_NAME] = None
        return binding
