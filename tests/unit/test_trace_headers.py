"""Outgoing requests carry the current trace (W3C ``traceparent``), and nothing when nothing is traced."""

from __future__ import annotations

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from ferryman.tools.websearch.providers import SearxngSearch
from ferryman.trace_headers import trace_headers

pytestmark = pytest.mark.anyio

CURRENT = SpanContext(0x1234, 0x5678, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
TRACEPARENT = f"00-{0x1234:032x}-{0x5678:016x}-01"


def test_the_headers_name_the_current_span_and_nothing_without_one() -> None:
    assert trace_headers() == {}
    with trace.use_span(NonRecordingSpan(CURRENT)):
        assert trace_headers() == {"traceparent": TRACEPARENT}


async def test_a_web_search_carries_the_trace_of_its_tool_call() -> None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("traceparent"))
        return httpx.Response(200, json={"results": [{"title": "t", "url": "https://e.com", "content": "c"}]})

    search = SearxngSearch("http://searxng.invalid", 5.0)
    search._client = httpx.AsyncClient(transport=httpx.MockTransport(answer))  # the provider's own, stood in
    try:
        with trace.use_span(NonRecordingSpan(CURRENT)):
            assert len(await search.search("ferryman", 3, None)) == 1
        await search.search("ferryman", 3, None)
    finally:
        await search.close()
    assert seen == [TRACEPARENT, None]
