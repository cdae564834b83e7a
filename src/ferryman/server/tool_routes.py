"""Toolgroups, tools and the tool runtime (Llama Stack's ``/toolgroups``, ``/tools``, ``/tool-runtime``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.limits import Id
from ferryman.api.registry import (
    DataList,
    InvokeToolRequest,
    RegisterToolGroupRequest,
    Tool,
    ToolGroup,
    ToolInvocationResult,
)

from .contract import PROVIDER_DATA, Endpoint, Param
from .http import JSONModelResponse, parse_body, provider_data, services
from .idempotent_routes import take_key


async def register_toolgroup(request: Request) -> Response:
    """Register a toolgroup: an MCP server's tools, or a builtin group's under another id."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, RegisterToolGroupRequest)
    return JSONModelResponse(await services(request).toolgroups.register(body, key))


async def list_toolgroups(request: Request) -> Response:
    """The builtin toolgroups and the registered ones the caller may read."""
    groups = await services(request).toolgroups.list_groups()
    return JSONModelResponse(DataList(data=[g.model_dump(mode="json") for g in groups]))


async def get_toolgroup(request: Request) -> Response:
    """One toolgroup."""
    return JSONModelResponse(await services(request).toolgroups.get(request.path_params["toolgroup_id"]))


async def unregister_toolgroup(request: Request) -> Response:
    """Forget a registered toolgroup."""
    await services(request).toolgroups.unregister(request.path_params["toolgroup_id"])
    return Response(status_code=200)


async def list_tools(request: Request) -> Response:
    """Every tool the caller may use, or those of one group."""
    group = request.query_params.get("toolgroup_id") or None
    listed = await services(request).toolgroups.tools(group, provider_data(request))
    return JSONModelResponse(DataList(data=[t.model_dump(mode="json") for t in listed]))


async def get_tool(request: Request) -> Response:
    """One tool's definition."""
    tool = await services(request).toolgroups.tool(request.path_params["tool_name"], provider_data(request))
    return JSONModelResponse(tool.definition)


async def list_runtime_tools(request: Request) -> Response:
    """Tool definitions of a toolgroup, or of an MCP server named by its URL."""
    query = request.query_params
    # The official client sends the endpoint object as ``mcp_endpoint[uri]``; plain ``mcp_endpoint`` works too.
    uri = query.get("mcp_endpoint[uri]") or query.get("mcp_endpoint") or None
    defs = await services(request).toolgroups.runtime_tools(query.get("tool_group_id"), uri, provider_data(request))
    return JSONModelResponse(DataList(data=[d.model_dump(mode="json", exclude_none=True) for d in defs]))


async def invoke_tool(request: Request) -> Response:
    """Run a tool outside any turn, with the request's provider data."""
    body = await parse_body(request, InvokeToolRequest)
    result = await services(request).toolgroups.invoke(body.tool_name, body.arguments, provider_data(request))
    return JSONModelResponse(result)


_TOOLS = "Tools"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("POST", "/toolgroups", register_toolgroup, "Register a toolgroup", _TOOLS, RegisterToolGroupRequest,
             ToolGroup, errors=(400, 409), creates=True, key_with_run=True,
             example={"toolgroup_id": "mcp::files", "provider_id": "model-context-protocol",
                      "mcp_endpoint": {"uri": "https://mcp.example.com/mcp"}}),
    Endpoint("GET", "/toolgroups", list_toolgroups, "List toolgroups", _TOOLS, response=DataList, errors=()),
    Endpoint("GET", "/toolgroups/{toolgroup_id:path}", get_toolgroup, "Get a toolgroup", _TOOLS,
             response=ToolGroup, errors=(404,)),
    Endpoint("DELETE", "/toolgroups/{toolgroup_id:path}", unregister_toolgroup, "Unregister a toolgroup", _TOOLS),
    Endpoint("GET", "/tools", list_tools, "List tools", _TOOLS, response=DataList, errors=(400, 404, 502),
             query=(Param("toolgroup_id", Id, "Only the tools of this group."),), headers=(PROVIDER_DATA,)),
    Endpoint("GET", "/tools/{tool_name}", get_tool, "Get a tool", _TOOLS, response=Tool, errors=(400, 404, 502),
             headers=(PROVIDER_DATA,)),
    Endpoint("GET", "/tool-runtime/list-tools", list_runtime_tools, "List a toolgroup's or MCP server's tools",
             _TOOLS, response=DataList, errors=(400, 404, 502),
             query=(Param("tool_group_id", Id, "The toolgroup."),
                    Param("mcp_endpoint[uri]", str, "An MCP server's URL (instead of a toolgroup).")),
             headers=(PROVIDER_DATA,)),
    Endpoint("POST", "/tool-runtime/invoke", invoke_tool, "Invoke a tool", _TOOLS, InvokeToolRequest,
             ToolInvocationResult, headers=(PROVIDER_DATA,), creates=True),
)  # fmt: skip
"""The tool routes."""
