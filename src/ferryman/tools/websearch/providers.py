"""Search engines' HTTP APIs: Brave, Tavily and SearXNG, behind one :class:`SearchProvider` seam.

Each provider keeps one HTTP client (opened on first use, closed with the app).
API keys travel only in the request's headers, never in a URL (which HTTP
clients log) nor in an error message: a failure says what went wrong, not with
which key.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ferryman.trace_headers import trace_headers

if TYPE_CHECKING:
    # Imported where used: httpx (about 3 MiB, with the command-line modules it imports) loads with the first
    # web search, not with the server.
    import httpx

BRAVE_URL = "https://api.search.brave.com"
TAVILY_URL = "https://api.tavily.com"

_TAGS = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class WebResult:
    """One hit: the page's title, address and a text snippet of it."""

    title: str
    url: str
    snippet: str

    def as_dict(self) -> dict[str, str]:
        """The result as JSON-ready fields."""
        return {"title": self.title, "url": self.url, "snippet": self.snippet}


class SearchFailed(Exception):
    """A search did not produce results; the message is safe to show the model (it names no key)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SearchProvider(Protocol):
    """A search engine."""

    @property
    def name(self) -> str:
        """``brave``, ``tavily`` or ``searxng``."""
        ...

    @property
    def key_field(self) -> str | None:
        """The provider-data field carrying a per-request key (None: the provider takes no key)."""
        ...

    async def search(self, query: str, max_results: int, api_key: str | None) -> list[WebResult]:
        """Search the web.

        Raises:
            SearchFailed: the provider could not be reached, refused, or answered nonsense.
        """
        ...

    async def close(self) -> None:
        """Close the provider's HTTP client."""
        ...


class _HttpProvider:
    """What every provider shares: its client, the request it sends, and how failures read."""

    name = ""
    key_field: str | None = None
    label = ""

    def __init__(self, base_url: str, timeout_seconds: float) -> None:
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout_seconds
        self._client: httpx.AsyncClient | None = None

    async def close(self) -> None:
        """Close the HTTP client, if one was opened."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _send(self, request: httpx.Request) -> Any:
        """Send a request; the decoded JSON answer, or :class:`SearchFailed`."""
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout, trust_env=False)
        request.headers.update(trace_headers())
        try:
            response = await self._client.send(request)
        except httpx.TimeoutException:
            raise SearchFailed(f"{self.label} did not answer within {self._timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise SearchFailed(f"{self.label} could not be reached ({type(exc).__name__})") from None
        if response.status_code in (401, 403):
            raise SearchFailed(self._refused(response.status_code))
        if response.status_code == 429:
            raise SearchFailed(f"{self.label} is rate limiting this server's searches; try again later")
        if response.status_code >= 400:
            raise SearchFailed(f"{self.label} answered HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise SearchFailed(f"{self.label} answered something other than JSON") from None

    def _refused(self, status: int) -> str:
        return f"the search provider refused the API key ({self.label}, HTTP {status})"


def _text(value: Any) -> str:
    """A field as plain text (providers mark matches up with HTML tags and entities)."""
    return html.unescape(_TAGS.sub("", value)).strip() if isinstance(value, str) else ""


def _results(items: Any, snippet_field: str, max_results: int) -> list[WebResult]:
    """Results from a provider's list of hits; hits without a URL are dropped."""
    if not isinstance(items, list):
        return []
    results = [
        WebResult(title=_text(item.get("title")), url=item["url"], snippet=_text(item.get(snippet_field)))
        for item in items
        if isinstance(item, dict) and isinstance(item.get("url"), str) and item["url"]
    ]
    return results[:max_results]


class BraveSearch(_HttpProvider):
    """The Brave Search web API (``GET /res/v1/web/search``, key in ``X-Subscription-Token``)."""

    name = "brave"
    key_field = "brave_search_api_key"
    label = "Brave Search"

    def __init__(self, base_url: str | None = None, timeout_seconds: float = 15.0) -> None:
        super().__init__(base_url or BRAVE_URL, timeout_seconds)

    async def search(self, query: str, max_results: int, api_key: str | None) -> list[WebResult]:
        """Search Brave; ``api_key`` is required."""
        import httpx

        request = httpx.Request(
            "GET",
            f"{self._base_url}/res/v1/web/search",
            params={"q": query, "count": max_results},
            headers={"Accept": "application/json", "X-Subscription-Token": _required(api_key, self)},
        )
        answer = await self._send(request)
        web = answer.get("web") if isinstance(answer, dict) else None
        return _results(web.get("results") if isinstance(web, dict) else None, "description", max_results)


class TavilySearch(_HttpProvider):
    """The Tavily search API (``POST /search``, key as a bearer token)."""

    name = "tavily"
    key_field = "tavily_search_api_key"
    label = "Tavily"

    def __init__(self, base_url: str | None = None, timeout_seconds: float = 15.0) -> None:
        super().__init__(base_url or TAVILY_URL, timeout_seconds)

    async def search(self, query: str, max_results: int, api_key: str | None) -> list[WebResult]:
        """Search Tavily; ``api_key`` is required."""
        import httpx

        request = httpx.Request(
            "POST",
            f"{self._base_url}/search",
            json={"query": query, "max_results": max_results, "search_depth": "basic"},
            headers={"Authorization": f"Bearer {_required(api_key, self)}"},
        )
        answer = await self._send(request)
        return _results(answer.get("results") if isinstance(answer, dict) else None, "content", max_results)


class SearxngSearch(_HttpProvider):
    """A SearXNG instance's JSON search (``GET /search?format=json``; it takes no key)."""

    name = "searxng"
    label = "SearXNG"

    async def search(self, query: str, max_results: int, api_key: str | None) -> list[WebResult]:
        """Search the instance (``api_key`` is ignored)."""
        import httpx

        request = httpx.Request(
            "GET",
            f"{self._base_url}/search",
            params={"q": query, "format": "json"},
            headers={"Accept": "application/json"},
        )
        answer = await self._send(request)
        return _results(answer.get("results") if isinstance(answer, dict) else None, "content", max_results)

    def _refused(self, status: int) -> str:
        # SearXNG has no keys: a 403 means the instance does not serve the JSON format.
        return f"the SearXNG instance refused JSON output (HTTP {status}); enable 'json' in its search.formats"


def _required(api_key: str | None, provider: _HttpProvider) -> str:
    if not api_key:
        raise SearchFailed(
            f"web search through {provider.label} needs an API key: configure websearch.api_key "
            f"or send '{provider.key_field}' in the X-LlamaStack-Provider-Data header"
        )
    return api_key
