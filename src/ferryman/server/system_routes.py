"""Health, models, tools and toolgroups."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ferryman.api.registry import DataList, InvokeToolRequest, RegisterModelRequest
from ferryman.services.models import ModelService
from ferryman.tools.registry import ToolRegistry

from .http import JSONModelResponse, parse_body


def system_routes(models: ModelService, tools: ToolRegistry) -> list[BaseRoute]:
    """Routes that describe what the server offers."""

    async def health(request: Request) -> Response:
        return JSONModelResponse({"status": "OK"})

    async def list_models(request: Request) -> Response:
        return JSONModelResponse(DataList(data=[m.model_dump(mode="json") for m in await models.list()]))

    async def get_model(request: Request) -> Response:
        return JSONModelResponse(await models.get(request.path_params["model_id"]))

    async def register_model(request: Request) -> Response:
        return JSONModelResponse(await models.register(await parse_body(request, RegisterModelRequest)))

    async def unregister_model(request: Request) -> Response:
        await models.unregister(request.path_params["model_id"])
        return Response(status_code=200)

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
        Route("/models", register_model, methods=["POST"]),
        Route("/models/{model_id:path}", get_model, methods=["GET"]),
        Route("/models/{model_id:path}", unregister_model, methods=["DELETE"]),
        Route("/toolgroups", list_toolgroups, methods=["GET"]),
        Route("/toolgroups/{toolgroup_id:path}", get_toolgroup, methods=["GET"]),
        Route("/tools", list_tools, methods=["GET"]),
        Route("/tools/{tool_name}", get_tool, methods=["GET"]),
        Route("/tool-runtime/invoke", invoke_tool, methods=["POST"]),
    ]
