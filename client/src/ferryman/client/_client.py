"""``Client`` and ``AsyncClient``: ferryman's API as typed resources."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType

import httpx

from ._transport import AsyncTransport, ClientOptions, RetryPolicy, SyncTransport
from .resources.agents import Agents, AsyncAgents
from .resources.approvals import Approvals, AsyncApprovals
from .resources.audit import AsyncAudit, Audit
from .resources.files import AsyncFiles, Files
from .resources.memory import AsyncMemory, Memory
from .resources.registry import (
    AsyncEmbeddings,
    AsyncModels,
    AsyncModerations,
    AsyncSafety,
    AsyncShields,
    AsyncToolgroups,
    AsyncTools,
    AsyncVectorDbs,
    Embeddings,
    Models,
    Moderations,
    Safety,
    Shields,
    Toolgroups,
    Tools,
    VectorDbs,
)
from .resources.responses import AsyncConversations, AsyncResponses, Conversations, Responses
from .resources.schedules import AsyncSchedules, Schedules
from .resources.usage import AsyncUsage, Usage
from .resources.vector_stores import AsyncVectorStores, VectorStores
from .resources.webhooks import AsyncWebhookDeliveries, WebhookDeliveries

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2


def _base_url_of(http_client: httpx.Client | httpx.AsyncClient | None) -> str | None:
    """The base URL a given HTTP client was made with (tests give one over ASGI), if any."""
    if http_client is None or not str(http_client.base_url):
        return None
    return str(http_client.base_url)


class Client:
    """A blocking client of a ferryman server.

    Args:
        base_url: The server's root URL; ``FERRYMAN_URL``, else ``http://127.0.0.1:8321``.
        api_key: The bearer token; ``FERRYMAN_API_KEY``, else none.
        timeout: Seconds to wait for each answer (a stream's next bytes included), or an ``httpx.Timeout``
            (a long read, a short connect).
        max_retries: Repeats of a request that failed to connect or got 408, 429 or 5xx; or a
            :class:`~ferryman.client.RetryPolicy` (its waits, and whether failed connections are repeated).
        http_client: The ``httpx.Client`` to send with (its transport, proxies…); one of the client's own if ``None``.
        default_headers: Headers sent with every request.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int | RetryPolicy = DEFAULT_MAX_RETRIES,
        http_client: httpx.Client | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        base_url = base_url or _base_url_of(http_client)
        self.options = ClientOptions.resolve(base_url, api_key, timeout, max_retries, default_headers)
        self._transport = transport = SyncTransport(self.options, http_client)
        self.agents = Agents(transport)
        self.models = Models(transport)
        self.files = Files(transport)
        self.vector_stores = VectorStores(transport)
        self.vector_dbs = VectorDbs(transport)
        self.responses = Responses(transport)
        self.conversations = Conversations(transport)
        self.toolgroups = Toolgroups(transport)
        self.tools = Tools(transport)
        self.shields = Shields(transport)
        self.safety = Safety(transport)
        self.moderations = Moderations(transport)
        self.embeddings = Embeddings(transport)
        self.usage = Usage(transport)
        self.schedules = Schedules(transport)
        self.memory = Memory(transport)
        self.audit = Audit(transport)
        self.approvals = Approvals(transport)
        self.webhook_deliveries = WebhookDeliveries(transport)

    @property
    def base_url(self) -> str:
        """The server's root URL."""
        return self.options.base_url

    def close(self) -> None:
        """Close the connections (of the client's own ``httpx.Client`` only)."""
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncClient:
    """An async client of a ferryman server; the same resources as :class:`Client`, awaited.

    Args:
        base_url: The server's root URL; ``FERRYMAN_URL``, else ``http://127.0.0.1:8321``.
        api_key: The bearer token; ``FERRYMAN_API_KEY``, else none.
        timeout: Seconds to wait for each answer (a stream's next bytes included), or an ``httpx.Timeout``
            (a long read, a short connect).
        max_retries: Repeats of a request that failed to connect or got 408, 429 or 5xx; or a
            :class:`~ferryman.client.RetryPolicy` (its waits, and whether failed connections are repeated).
        http_client: The ``httpx.AsyncClient`` to send with; one of the client's own if ``None``.
        default_headers: Headers sent with every request.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int | RetryPolicy = DEFAULT_MAX_RETRIES,
        http_client: httpx.AsyncClient | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        base_url = base_url or _base_url_of(http_client)
        self.options = ClientOptions.resolve(base_url, api_key, timeout, max_retries, default_headers)
        self._transport = transport = AsyncTransport(self.options, http_client)
        self.agents = AsyncAgents(transport)
        self.models = AsyncModels(transport)
        self.files = AsyncFiles(transport)
        self.vector_stores = AsyncVectorStores(transport)
        self.vector_dbs = AsyncVectorDbs(transport)
        self.responses = AsyncResponses(transport)
        self.conversations = AsyncConversations(transport)
        self.toolgroups = AsyncToolgroups(transport)
        self.tools = AsyncTools(transport)
        self.shields = AsyncShields(transport)
        self.safety = AsyncSafety(transport)
        self.moderations = AsyncModerations(transport)
        self.embeddings = AsyncEmbeddings(transport)
        self.usage = AsyncUsage(transport)
        self.schedules = AsyncSchedules(transport)
        self.memory = AsyncMemory(transport)
        self.audit = AsyncAudit(transport)
        self.approvals = AsyncApprovals(transport)
        self.webhook_deliveries = AsyncWebhookDeliveries(transport)

    @property
    def base_url(self) -> str:
        """The server's root URL."""
        return self.options.base_url

    async def aclose(self) -> None:
        """Close the connections (of the client's own ``httpx.AsyncClient`` only)."""
        await self._transport.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
