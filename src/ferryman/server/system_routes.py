"""Health, models, tools and toolgroups."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ferryman.api.registry import DataList, InvokeToolRequest
from ferryman.inference.router import ModelRouter
from ferryman.tools.registry import ToolRegistry

from .http import JSONModelResponse, parse_body


def system_routes(models: ModelRouter, tools: ToolRegistry) -> list[BaseRoute]:
    """Routes that describe what the server offers."""

    async def health(request: Request) -> Response:
        return JSONModelResponse({"status": "OK"})

    async def list_models(request: Request) -> Response:
        if not models.models():
            await models.refresh()
        return JSONModelResponse(DataList(data=[m.model_dump(mode="json") for m in models.models()]))

    async def get_model(request: Request) -> Response:
        route = await models.route(request.path_params["model_id"])
        return JSONModelResponse(route.model)

    async def list_toolgroups(request: Request) -> Response:
        return JSONModelResponse(DataList(data=[g.model_dump(mode="json") for g in tools.groups()]))

    async def get_toolgroup(request: Request) -> Response:
        return JSONModelResponse(tools.get_group(request.path_params["toolgroup_id"]))

    async def list_tools(request: Request) -> Response:
        listed = tools.tools(request.query_params.get("toolgroup_id") or None)
        return JSONModelResponse(DataList(data=[t.model_dump(mode="json") for t in listed]))

    async def get_tool(request: Request) -> Response:
        return JSONModelResponse(tools.get_tool(request.path_params["tool_name"]).definition)

    async def invoke_tool(request: Request) -> Response:
        body = await parse_body(request, InvokeToolRequest)
        return JSONModelResponse(await tools.get_tool(body.tool_name).invoke(body.arguments))

    return [
        Route("/health", health, methods=["GET"]),
        Route("/models", list_models, methods=["GET"]),
        Route("/models/{model_id:path}", get_model, methods=["GET"]),
        Route("/toolgroups", list_toolgroups, methods=["GET"]),
        Route("/toolgroups/{toolgroup_id:path}", get_toolgroup, methods=["GET"]),
        Route("/tools", list_tools, methods=["GET"]),
        Route("/tools/{tool_name}", get_tool, methods=["GET"]),
        Route("/tool-runtime/invoke", invoke_tool, methods=["POST"]),
    ]
