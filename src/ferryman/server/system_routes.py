"""Health, models, tools and toolgroups."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.registry import (
    DataList,
    HealthStatus,
    InvokeToolRequest,
    Model,
    RegisterModelRequest,
    Tool,
    ToolGroup,
    ToolInvocationResult,
)

from .contract import Endpoint, Param
from .http import JSONModelResponse, parse_body, services


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
    body = await parse_body(request, RegisterModelRequest)
    return JSONModelResponse(await services(request).model_registry.register(body))


async def unregister_model(request: Request) -> Response:
    """Forget a registered model."""
    await services(request).model_registry.unregister(request.path_params["model_id"])
    return Response(status_code=200)


async def list_toolgroups(request: Request) -> Response:
    """Every server-side toolgroup."""
    groups = services(request).tools.groups()
    return JSONModelResponse(DataList(data=[g.model_dump(mode="json") for g in groups]))


async def get_toolgroup(request: Request) -> Response:
    """One toolgroup."""
    return JSONModelResponse(services(request).tools.get_group(request.path_params["toolgroup_id"]))


async def list_tools(request: Request) -> Response:
    """Every server-side tool, or those of one group."""
    listed = services(request).tools.tools(request.query_params.get("toolgroup_id") or None)
    return JSONModelResponse(DataList(data=[t.model_dump(mode="json") for t in listed]))


async def get_tool(request: Request) -> Response:
    """One tool's definition."""
    return JSONModelResponse(services(request).tools.get_tool(request.path_params["tool_name"]).definition)


async def invoke_tool(request: Request) -> Response:
    """Run a server-side tool."""
    body = await parse_body(request, InvokeToolRequest)
    return JSONModelResponse(await services(request).tools.get_tool(body.tool_name).invoke(body.arguments))


_MODELS, _TOOLS = "Models", "Tools"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("GET", "/health", health, "Health check", "Health", response=HealthStatus, errors=()),
    Endpoint("GET", "/models", list_models, "List models", _MODELS, response=DataList, errors=()),
    Endpoint("POST", "/models", register_model, "Register a model", _MODELS, RegisterModelRequest, Model,
             errors=(400, 404, 409, 502), creates=True),
    Endpoint("GET", "/models/{model_id:path}", get_model, "Get a model", _MODELS, response=Model),
    Endpoint("DELETE", "/models/{model_id:path}", unregister_model, "Unregister a model", _MODELS),
    Endpoint("GET", "/toolgroups", list_toolgroups, "List toolgroups", _TOOLS, response=DataList, errors=()),
    Endpoint("GET", "/toolgroups/{toolgroup_id:path}", get_toolgroup, "Get a toolgroup", _TOOLS,
             response=ToolGroup),
    Endpoint("GET", "/tools", list_tools, "List tools", _TOOLS, response=DataList,
             query=(Param("toolgroup_id", str, "Only the tools of this group."),)),
    Endpoint("GET", "/tools/{tool_name}", get_tool, "Get a tool", _TOOLS, response=Tool),
    Endpoint("POST", "/tool-runtime/invoke", invoke_tool, "Invoke a server-side tool", _TOOLS, InvokeToolRequest,
             ToolInvocationResult),
)  # fmt: skip
"""What the server offers: health, models, tools."""
