"""Health and models."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.registry import DataList, HealthStatus, Model, RegisterModelRequest

from .contract import Endpoint
from .http import JSONModelResponse, parse_body, services
from .idempotent_routes import take_key


async def health(request: Request) -> Response:
    """The server is up."""
    return JSONModelResponse(HealthStatus())


async def list_models(request: Request) -> Response:
    """Every model the server routes to."""
    models = await services(request).model_registry.list()
    return JSONModelResponse(DataList(data=[m.model_dump(mode="json") for m in models]))


async def get_model(request: Request) -> Response:
    """One model."""
    return JSONModelResponse(await services(request).model_registry.get(request.path_params["model_id"]))


async def register_model(request: Request) -> Response:
    """Register a model with a provider."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, RegisterModelRequest)
    return JSONModelResponse(await services(request).model_registry.register(body, key))


async def unregister_model(request: Request) -> Response:
    """Forget a registered model."""
    await services(request).model_registry.unregister(request.path_params["model_id"])
    return Response(status_code=200)


_MODELS = "Models"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("GET", "/health", health, "Health check", "Health", response=HealthStatus, errors=()),
    Endpoint("GET", "/models", list_models, "List models", _MODELS, response=DataList, errors=()),
    Endpoint("POST", "/models", register_model, "Register a model", _MODELS, RegisterModelRequest, Model,
             errors=(400, 404, 409, 502), creates=True, key_with_run=True),
    Endpoint("GET", "/models/{model_id:path}", get_model, "Get a model", _MODELS, response=Model),
    Endpoint("DELETE", "/models/{model_id:path}", unregister_model, "Unregister a model", _MODELS),
)  # fmt: skip
"""What the server offers: health and models."""
