"""The turn plan of a response: its model, sampling, tools and output format."""

from __future__ import annotations

from typing import Any

from ferryman.api.content import ToolDef
from ferryman.api.inference import JsonSchemaResponseFormat
from ferryman.api.responses import CreateResponseRequest, FunctionTool, TextConfig
from ferryman.engine.context_fit import ContextPolicy
from ferryman.engine.plan import TurnPlan
from ferryman.engine.unlisted import UnlistedTools
from ferryman.inference.base import Sampling
from ferryman.safety.base import Shield
from ferryman.tools.registry import BoundTool

MAX_ITERATIONS = 10
_HOSTED_CHOICES = {
    "file_search": "file_search",
    "code_interpreter": "code_interpreter",
    "web_search": "web_search",
    "web_search_preview": "web_search",
    "mcp": "required",
}
"""What a hosted tool's ``tool_choice`` asks of the model (an ``mcp`` choice without a name: any tool)."""


def _tool_choice(choice: str | dict[str, Any] | None) -> str | None:
    """The tool the model must call, by the name it sees; a hosted tool's choice names the tool after its type."""
    if not isinstance(choice, dict):
        return choice
    named = choice.get("name") or (choice.get("function") or {}).get("name")
    if named:
        return str(named)
    return _HOSTED_CHOICES.get(str(choice.get("type")), "auto")


def _response_format(text: TextConfig | None) -> JsonSchemaResponseFormat | None:
    if text is None or text.format.type == "text":
        return None
    if text.format.type == "json_object":
        return JsonSchemaResponseFormat(json_schema={"type": "object"})
    fmt = text.format
    return JsonSchemaResponseFormat(json_schema=fmt.schema_ or {}, name=fmt.name, strict=fmt.strict)


def response_plan(
    request: CreateResponseRequest,
    provider_data: dict[str, Any] | None,
    server_tools: dict[str, BoundTool],
    held: frozenset[str] = frozenset(),
    guardrails: list[Shield] | None = None,
    unlisted: tuple[UnlistedTools, ...] = (),
) -> TurnPlan:
    """The plan of the turn a response runs as; function calls end it (the client runs them).

    ``server_tools`` are the request's hosted tools, bound (see ``hosted/table.py``): the engine runs them inside
    the turn, except calls of the ``held`` ones, which end it as approval requests (see ``approvals.py``).
    ``guardrails`` check the input and the answer (see ``guardrails.py``). ``unlisted`` are the ``mcp`` servers
    that could not list their tools: the model is told.
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
    return TurnPlan(
        model=request.model,
        instructions=request.instructions or "",
        sampling=Sampling(temperature=request.temperature, top_p=request.top_p, max_tokens=request.max_output_tokens),
        tool_choice=_tool_choice(request.tool_choice),
        response_format=_response_format(request.text),
        max_infer_iters=MAX_ITERATIONS,
        server_tools=server_tools,
        client_tools=client_tools,
        input_shields=list(guardrails or []),
        output_shields=list(guardrails or []),
        provider_data=provider_data,
        client_tools_end_turn=True,
        approval_required=held,
        unlisted=unlisted,
        context=context_policy(request),
    )


def context_policy(request: CreateResponseRequest) -> ContextPolicy:
    """How a response keeps its prompt within the context: ``context_management``'s compaction, else
    ``truncation`` (``auto``: drop the oldest items; ``disabled``, the default: refuse)."""
    for entry in request.context_management or []:
        return ContextPolicy("compaction", entry.compact_threshold)
    return ContextPolicy("truncation" if request.truncation == "auto" else "disabled")
