"""The web search tool's settings (``websearch:`` in the config file)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_serializer, model_validator

ProviderName = Literal["brave", "tavily", "searxng"]


class WebSearchSettings(BaseModel):
    """Which search engine ``builtin::websearch`` asks, and how.

    With no ``provider``, a request whose provider data carries a key
    (``tavily_search_api_key`` or ``brave_search_api_key``) searches that
    provider at its public address; any other call is answered, to the model,
    that web search is not configured.

    Attributes:
        provider: ``brave``, ``tavily`` or ``searxng``.
        base_url: The provider's address (default: its public API; required for ``searxng``).
        api_key: The provider's key (Brave, Tavily); a request's provider data overrides it.
        max_results: Results per search, unless the toolgroup reference binds ``max_results``.
        timeout_seconds: Time allowed for one search.
    """

    provider: ProviderName | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    max_results: int = Field(default=5, ge=1, le=20)
    timeout_seconds: float = Field(default=15.0, gt=0)

    @model_validator(mode="after")
    def _searxng_needs_url(self) -> WebSearchSettings:
        if self.provider == "searxng" and not self.base_url:
            raise ValueError("websearch provider 'searxng' needs a base_url (the SearXNG instance)")
        return self

    @field_serializer("api_key", when_used="json")
    def _reveal(self, key: SecretStr | None) -> str | None:
        # The JSON dump carries the settings to ``--workers`` processes; repr and str stay masked.
        return key.get_secret_value() if key is not None else None
