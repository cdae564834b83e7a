"""The turn plan of a response: its model, sampling, function tools and output format."""

from __future__ import annotations

from typing import Any

from ferryman.api.content import ToolDef
from ferryman.api.inference import JsonSchemaResponseFormat
from ferryman.api.responses import CreateResponseRequest, TextConfig
from ferryman.engine.plan import TurnPlan
from ferryman.inference.base import Sampling

MAX_ITERATIONS = 10


def _tool_choice(choice: str | dict[str, Any] | None) -> str | None:
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


def response_plan(request: CreateResponseRequest, provider_data: dict[str, Any] | None) -> TurnPlan:
    """The plan of the turn a response runs as; function calls end it (the client runs them)."""
    client_tools = {
        tool.name: ToolDef(
            name=tool.name,
            description=tool.description,
            input_schema=tool.parameters or {"type": "object", "properties": {}},
        )
        for tool in request.tools
    }
    return TurnPlan(
        model=request.model,
        instructions=request.instructions or "",
        sampling=Sampling(temperature=request.temperature, top_p=request.top_p, max_tokens=request.max_output_tokens),
        tool_choice=_tool_choice(request.tool_choice),
        response_format=_response_format(request.text),
        max_infer_iters=MAX_ITERATIONS,
        server_tools={},
        client_tools=client_tools,
        input_shields=[],
        output_shields=[],
        provider_data=provider_data,
        client_tools_end_turn=True,
    )
