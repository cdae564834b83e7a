"""The shipped model for tests that run it: every installed runtime, and never skipped in CI."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from ferryman.embedded_settings import Runtime
from ferryman.inference.embedded import EmbeddedProvider, default_model_path, embedded_available


def shipped_model(runtime: Runtime = "auto") -> str:
    """The SmolLM2 GGUF, once ``runtime`` can run it: else skip the test, or fail it in CI (which installs both)."""
    ok, why = embedded_available(runtime)
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the embedded-model tests: {why}")
        pytest.skip(why)
    path = default_model_path()
    assert path is not None
    return path


def provider_on(runtime: Runtime) -> Iterator[EmbeddedProvider]:
    """A provider over the shipped model on ``runtime`` (loaded lazily), closed afterwards: a fixture's body."""
    shipped_model(runtime)
    provider = EmbeddedProvider(runtime=runtime)
    yield provider
    asyncio.run(provider.aclose())
