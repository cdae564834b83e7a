"""``builtin::websearch``'s ``web_search`` tool: the model's query, run by the configured search provider."""

from __future__ import annotations

import logging
from typing import Any

from ferryman.api.content import ToolParameter
from ferryman.api.registry import Tool, ToolInvocationResult
from ferryman.websearch_settings import WebSearchSettings

from ..context import tool_context
from .providers import BraveSearch, SearchFailed, SearchProvider, SearxngSearch, TavilySearch, WebResult

log = logging.getLogger(__name__)

TOOLGROUP_ID = "builtin::websearch"
TOOL_NAME = "web_search"
MAX_RESULTS_LIMIT = 20

_DEFINITION = Tool(
    identifier=TOOL_NAME,
    toolgroup_id=TOOLGROUP_ID,
    description="Search the web for information",
    parameters=[ToolParameter(name="query", parameter_type="string", description="The query to search for")],
)


class WebSearch:
    """Searches the web for the model.

    The provider is the configured one; with none configured, a request whose
    provider data carries a Tavily or Brave key searches that provider. The key
    is the request's (provider data) when it sends one, else the configured
    one; it is never stored, logged or echoed. A toolgroup reference may bind
    ``max_results`` (1 to 20).

    The result's ``metadata`` is ``{"query", "provider", "results": [{title, url, snippet}]}``.

    Args:
        settings: The ``websearch:`` section of the config.
    """

    def __init__(self, settings: WebSearchSettings | None = None) -> None:
        self._settings = settings or WebSearchSettings()
        self._providers: dict[str, SearchProvider] = {}

    @property
    def definition(self) -> Tool:
        """The tool's listing: one ``query`` parameter."""
        return _DEFINITION

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Search for ``arguments['query']``; every failure is an error result for the model."""
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolInvocationResult(error_message="web_search needs a non-empty 'query' string", error_code=400)
        query = query.strip()
        max_results = arguments.get("max_results", self._settings.max_results)
        if not isinstance(max_results, int) or not 1 <= max_results <= MAX_RESULTS_LIMIT:
            return ToolInvocationResult(
                error_message=f"web_search's max_results must be an integer from 1 to {MAX_RESULTS_LIMIT}",
                error_code=400,
            )
        provider_data = tool_context.get().provider_data
        provider = self._provider(provider_data)
        if provider is None:
            return ToolInvocationResult(
                error_message=(
                    "web search is not configured on this server (websearch.provider), and the request's "
                    "provider data carries no 'tavily_search_api_key' or 'brave_search_api_key'"
                ),
                error_code=503,
            )
        try:
            results = await provider.search(query, max_results, self._key(provider, provider_data))
        except SearchFailed as exc:
            log.warning("web search through %s failed: %s", provider.name, exc.message)
            return ToolInvocationResult(error_message=exc.message, error_code=502)
        return ToolInvocationResult(
            content=_readable(query, results),
            metadata={"query": query, "provider": provider.name, "results": [r.as_dict() for r in results]},
        )

    async def close(self) -> None:
        """Close the providers' HTTP clients."""
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.close()

    def _provider(self, provider_data: dict[str, Any]) -> SearchProvider | None:
        """The configured provider, else one the request brings a key for (at its public address)."""
        name: str | None = self._settings.provider
        if name is None:
            name = next((p for p, field in _KEYED if _string(provider_data.get(field))), None)
            if name is None:
                return None
        if name not in self._providers:
            self._providers[name] = self._open(name)
        return self._providers[name]

    def _open(self, name: str) -> SearchProvider:
        configured = name == self._settings.provider
        base_url = self._settings.base_url if configured else None
        timeout = self._settings.timeout_seconds
        if name == "brave":
            return BraveSearch(base_url, timeout)
        if name == "tavily":
            return TavilySearch(base_url, timeout)
        return SearxngSearch(base_url or "", timeout)

    def _key(self, provider: SearchProvider, provider_data: dict[str, Any]) -> str | None:
        """The request's key for the provider, else the configured one (for the configured provider only)."""
        if provider.key_field is None:
            return None
        requested = _string(provider_data.get(provider.key_field))
        if requested:
            return requested
        configured = self._settings.api_key
        if configured is not None and provider.name == self._settings.provider:
            return configured.get_secret_value()
        return None


_KEYED = (("tavily", "tavily_search_api_key"), ("brave", "brave_search_api_key"))
"""Providers a request may pick by its provider data when none is configured, in order of preference."""


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _readable(query: str, results: list[WebResult]) -> str:
    """The results as the model reads them: numbered, each with title, address and snippet."""
    if not results:
        return f"No web results for '{query}'."
    blocks = [f"[{n}] {r.title or r.url}\nURL: {r.url}\n{r.snippet}".rstrip() for n, r in enumerate(results, 1)]
    return f"Web results for '{query}':\n\n" + "\n\n".join(blocks)
