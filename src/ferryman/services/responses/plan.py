"""The turn plan of a response: its model, sampling, tools and output format."""

from __future__ import annotations

from typing import Any

from ferryman.api.content import ToolDef
from ferryman.api.inference import JsonSchemaResponseFormat
from ferryman.api.responses import CreateResponseRequest, FileSearchTool, FunctionTool, ResponseTool, TextConfig
from ferryman.engine.plan import TurnPlan
from ferryman.inference.base import Sampling
from ferryman.knowledge.rag import Searcher
from ferryman.tools.file_search import TOOL_NAME, FileSearch
from ferryman.tools.registry import BoundTool

MAX_ITERATIONS = 10


def _tool_choice(choice: str | dict[str, Any] | None) -> str | None:
    if isinstance(choice, dict) and choice.get("type") == TOOL_NAME:
        return TOOL_NAME
    if isinstance(choice, dict):
        return str(choice.get("name") or (choice.get("function") or {}).get("name") or "auto")
    return choice


def _response_format(text: TextConfig | None) -> JsonSchemaResponseFormat | None:
    if text is None or text.format.type == "text":
        return None
    if text.format.type == "json_object":
        return JsonSchemaResponseFormat(json_schema={"type": "object"})
    fmt = text.format
    return JsonSchemaResponseFormat(json_schema=fmt.schema_ or {}, name=fmt.name, strict=fmt.strict)


def file_search_tool(tools: list[ResponseTool]) -> FileSearchTool | None:
    """The request's ``file_search`` tool, if it has one."""
    return next((tool for tool in tools if isinstance(tool, FileSearchTool)), None)


def _bound_search(tool: FileSearchTool, searcher: Searcher) -> BoundTool:
    """The search as the model may call it: everything but the query is the request's."""
    ranking = tool.ranking_options
    args: dict[str, Any] = {
        "vector_store_ids": list(tool.vector_store_ids),
        "max_num_results": tool.max_num_results,
        "filters": tool.filters,
        "ranking_options": ranking.model_dump(exclude_none=True) if ranking else None,
    }
    return BoundTool(FileSearch(searcher), args)


def response_plan(request: CreateResponseRequest, provider_data: dict[str, Any] | None, searcher: Searcher) -> TurnPlan:
    """The plan of the turn a response runs as; function calls end it (the client runs them).

    A ``file_search`` tool becomes a server tool the engine runs inside the turn.
    """
    client_tools = {
        tool.name: ToolDef(
            name=tool.name,
            description=tool.description,
            input_schema=tool.parameters or {"type": "object", "properties": {}},
        )
        for tool in request.tools
        if isinstance(tool, FunctionTool)
    }
    search = file_search_tool(request.tools)
    server_tools = {TOOL_NAME: _bound_search(search, searcher)} if search is not None else {}
    return TurnPlan(
        model=request.model,
        instructions=request.instructions or "",
        sampling=Sampling(temperature=request.temperature, top_p=request.top_p, max_tokens=request.max_output_tokens),
        tool_choice=_tool_choice(request.tool_choice),
        response_format=_response_format(request.text),
        max_infer_iters=MAX_ITERATIONS,
        server_tools=server_tools,
        client_tools=client_tools,
        input_shields=[],
        output_shields=[],
        provider_data=provider_data,
        client_tools_end_turn=True,
    )
