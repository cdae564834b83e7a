"""Per-request provider data (the ``X-LlamaStack-Provider-Data`` header): which key applies where.

A request may carry settings for the providers that serve it, most often an
API key. ``api_key`` applies to whichever remote provider serves the request;
``<provider_id>_api_key`` to one provider by name; and Llama Stack's
per-kind names (``openai_api_key``, ``vllm_api_token``…) to providers of that
kind. The values live only in memory for the duration of the request.
"""

from __future__ import annotations

from typing import Any

HEADER = "X-LlamaStack-Provider-Data"
"""The request header that carries provider data."""

_KIND_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("openai_api_key",),
    "vllm": ("vllm_api_token", "vllm_api_key"),
    "ollama": ("ollama_api_key",),
    "llama-cpp": ("llamacpp_api_key", "llama_cpp_api_key"),
    "together": ("together_api_key",),
    "fireworks": ("fireworks_api_key",),
    "groq": ("groq_api_key",),
    "sambanova": ("sambanova_api_key",),
    "nvidia": ("nvidia_api_key",),
    "gemini": ("gemini_api_key",),
    "anthropic": ("anthropic_api_key",),
}


def provider_kind(provider_type: str) -> str:
    """The kind of a provider type: ``remote::vllm`` → ``vllm``."""
    return provider_type.rsplit("::", 1)[-1]


def key_names(provider_id: str, kind: str) -> tuple[str, ...]:
    """The provider-data names that carry a key for this provider, most specific first."""
    return (f"{provider_id}_api_key", *_KIND_KEYS.get(kind, ()), "api_key")


def api_key_from(provider_data: dict[str, Any] | None, names: tuple[str, ...]) -> str | None:
    """The first non-empty string value among ``names``."""
    if not provider_data:
        return None
    for name in names:
        value = provider_data.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def scrub(text: str, secret: str | None) -> str:
    """Remove a secret from a message (upstream errors sometimes quote the key they got)."""
    if not secret:
        return text
    return text.replace(secret, "***")
