"""Shields, the Safety API and OpenAI moderations (``/shields``, ``/safety/run-shield``, ``/moderations``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.safety import (
    ListShieldsResponse,
    ModerationRequest,
    ModerationResponse,
    RegisterShieldRequest,
    RunShieldRequest,
    RunShieldResponse,
    ShieldResource,
)

from .contract import Endpoint
from .http import JSONModelResponse, parse_body, services
from .idempotent_routes import take_key


async def register_shield(request: Request) -> Response:
    """Register a shield: a guard model, the local rules, under an id of the caller's choice."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, RegisterShieldRequest)
    return JSONModelResponse(await services(request).safety.register(body, key))


async def list_shields(request: Request) -> Response:
    """The registered shields the caller may read."""
    return JSONModelResponse(ListShieldsResponse(data=await services(request).safety.list_shields()))


async def get_shield(request: Request) -> Response:
    """One registered shield."""
    return JSONModelResponse(await services(request).safety.get(request.path_params["shield_id"]))


async def unregister_shield(request: Request) -> Response:
    """Forget a registered shield."""
    await services(request).safety.unregister(request.path_params["shield_id"])
    return Response(status_code=200)


async def run_shield(request: Request) -> Response:
    """Run one shield on messages: its violation, or null."""
    body = await parse_body(request, RunShieldRequest)
    verdict = await services(request).safety.run_shield(body)
    return JSONModelResponse(RunShieldResponse(violation=verdict.violation, redacted_messages=verdict.redacted))


async def moderate(request: Request) -> Response:
    """OpenAI's moderations: each input classified by a shield or a guard model."""
    body = await parse_body(request, ModerationRequest)
    return JSONModelResponse(await services(request).safety.moderate(body))


_SAFETY = "Safety"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("POST", "/shields", register_shield, "Register a shield", _SAFETY, RegisterShieldRequest,
             ShieldResource, errors=(400, 409), creates=True, key_with_run=True,
             example={"shield_id": "no-secrets", "provider_id": "ferryman-local", "params": {"action": "redact"}}),
    Endpoint("GET", "/shields", list_shields, "List shields", _SAFETY, response=ListShieldsResponse, errors=()),
    Endpoint("GET", "/shields/{shield_id:path}", get_shield, "Get a shield", _SAFETY, response=ShieldResource,
             errors=(404,)),
    Endpoint("DELETE", "/shields/{shield_id:path}", unregister_shield, "Unregister a shield", _SAFETY),
    Endpoint("POST", "/safety/run-shield", run_shield, "Run a shield", _SAFETY, RunShieldRequest,
             RunShieldResponse, errors=(400, 404, 502),
             example={"shield_id": "no-secrets", "messages": [{"role": "user", "content": "hi"}], "params": {}}),
    Endpoint("POST", "/moderations", moderate, "Classify text (OpenAI moderations)", _SAFETY, ModerationRequest,
             ModerationResponse, errors=(400, 404, 502), example={"input": "hello", "model": "no-secrets"}),
)  # fmt: skip
"""The safety routes."""
