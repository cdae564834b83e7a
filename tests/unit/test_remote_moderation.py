"""The remote-moderation seam over a real OpenAI-compatible ``/moderations`` endpoint (a small app over ASGI)."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ferryman.api.content import SystemMessage, UserMessage
from ferryman.api.safety import ShieldResource
from ferryman.errors import InvalidRequestError, UpstreamError
from ferryman.safety.base import ShieldVerdict
from ferryman.safety.moderation import OPENAI_CATEGORIES, moderation_result
from ferryman.safety.remote import OpenAICompatibleModeration, RemoteModerationShield

pytestmark = pytest.mark.anyio


def moderation_app(seen: list[dict[str, Any]]) -> Starlette:
    """Flags any text containing 'hate' under the hate category; 'explode' fails the request."""

    async def moderations(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        if any("explode" in text for text in body["input"]):
            return JSONResponse({"error": {"message": "boom"}}, status_code=500)
        results = []
        for text in body["input"]:
            hit = "hate" in text
            results.append(
                {
                    "flagged": hit,
                    "categories": {name: hit and name == "hate" for name in OPENAI_CATEGORIES},
                    "category_scores": {name: 0.9 if hit and name == "hate" else 0.01 for name in OPENAI_CATEGORIES},
                    "category_applied_input_types": {name: ["text"] for name in OPENAI_CATEGORIES},
                }
            )
        return JSONResponse({"id": "modr-1", "model": body["model"], "results": results})

    return Starlette(routes=[Route("/v1/moderations", moderations, methods=["POST"])])


def shield(seen: list[dict[str, Any]], target: str = "remote/omni") -> RemoteModerationShield:
    client = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=moderation_app(seen)), base_url="http://m/v1")
    service = OpenAICompatibleModeration(
        openai.AsyncOpenAI(base_url="http://m/v1", api_key="k", http_client=client, max_retries=0)
    )
    resource = ShieldResource(identifier="mod", provider_id="remote-moderation", provider_resource_id=target)
    return RemoteModerationShield(resource, {"remote": service})


async def test_a_flagged_last_message_is_an_error_naming_openai_categories() -> None:
    seen: list[dict[str, Any]] = []
    verdict = await shield(seen).run([SystemMessage(content="hate is fine here"), UserMessage(content="I hate x")], {})
    assert seen == [{"model": "omni", "input": ["I hate x"]}]
    violation = verdict.violation
    assert violation is not None and violation.violation_level == "error"
    assert violation.metadata["openai_categories"] == ["hate"]
    result = moderation_result(verdict)
    assert result.flagged and result.categories["hate"] and not result.categories["violence"]


async def test_clean_text_passes_and_a_failing_service_raises() -> None:
    seen: list[dict[str, Any]] = []
    assert await shield(seen).run([UserMessage(content="hello")], {}) == ShieldVerdict(None)
    with pytest.raises(UpstreamError):
        await shield(seen).run([UserMessage(content="explode")], {})


def test_the_target_must_name_a_known_service_and_a_model() -> None:
    for target in ("other/omni", "remote", "remote/"):
        with pytest.raises(InvalidRequestError):
            shield([], target)


async def test_the_moderation_request_carries_the_current_trace() -> None:
    sent: list[str | None] = []

    async def moderations(request: Request) -> JSONResponse:
        sent.append(request.headers.get("traceparent"))
        return JSONResponse({"id": "modr-1", "model": "omni", "results": []})

    app = Starlette(routes=[Route("/v1/moderations", moderations, methods=["POST"])])
    client = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://m/v1")
    service = OpenAICompatibleModeration(
        openai.AsyncOpenAI(base_url="http://m/v1", api_key="k", http_client=client, max_retries=0)
    )
    context = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, False, TraceFlags(1))
    with trace.use_span(NonRecordingSpan(context)):
        await service.moderate("omni", ["hello"])
    await service.moderate("omni", ["hello"])
    assert sent == ["00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", None]
