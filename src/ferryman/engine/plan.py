"""What a turn will do: the agent's settings merged with the turn's own overrides."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ferryman.api.agents import AgentConfig, ToolGroupRef, ToolGroupWithArgs
from ferryman.api.content import Message, SystemMessage, ToolDef
from ferryman.api.inference import (
    GreedySamplingStrategy,
    ResponseFormat,
    SamplingParams,
    ToolConfig,
    TopKSamplingStrategy,
    TopPSamplingStrategy,
)
from ferryman.errors import InvalidRequestError, ToolsUnlistedError
from ferryman.inference.base import ChatRequest, Sampling
from ferryman.safety.base import Shield, ShieldRegistry
from ferryman.tools.registry import DEFAULT_MAX_OUTPUT_CHARS, BoundTool, ToolRegistry

from .approvals import ApprovalPolicy
from .context_fit import ContextPolicy
from .unlisted import UnlistedTools, system_note


@dataclass(frozen=True)
class TurnOverrides:
    """Per-turn settings, stored with the turn so that a resume applies them again."""

    toolgroups: list[ToolGroupRef] = field(default_factory=list)
    tool_config: ToolConfig | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form for storage."""
        return {
            "toolgroups": [g if isinstance(g, str) else g.model_dump() for g in self.toolgroups],
            "tool_config": self.tool_config.model_dump() if self.tool_config else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnOverrides:
        """Rebuild from :meth:`to_json`'s output."""
        groups: list[ToolGroupRef] = [
            g if isinstance(g, str) else ToolGroupWithArgs.model_validate(g) for g in data.get("toolgroups") or []
        ]
        config = data.get("tool_config")
        return cls(groups, ToolConfig.model_validate(config) if config else None)


def sampling_of(params: SamplingParams | None) -> Sampling:
    """Translate Llama Stack sampling params to provider-neutral ones."""
    if params is None:
        return Sampling()
    strategy = params.strategy
    temperature = top_p = None
    top_k = None
    if isinstance(strategy, GreedySamplingStrategy):
        temperature = 0.0
    elif isinstance(strategy, TopPSamplingStrategy):
        temperature, top_p = strategy.temperature, strategy.top_p
    elif isinstance(strategy, TopKSamplingStrategy):
        top_k = strategy.top_k
    return Sampling(
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        max_tokens=params.max_tokens or None,
        repetition_penalty=params.repetition_penalty,
        stop=params.stop or None,
    )


@dataclass(frozen=True)
class TurnPlan:
    """Everything the loop needs to know about how to run a turn."""

    model: str
    instructions: str
    sampling: Sampling
    tool_choice: str | None
    response_format: ResponseFormat | None
    max_infer_iters: int
    server_tools: dict[str, BoundTool]
    client_tools: dict[str, ToolDef]
    input_shields: list[Shield]
    output_shields: list[Shield]
    provider_data: dict[str, Any] | None = None
    client_tools_end_turn: bool = False
    """End the turn when the model calls a client tool (Responses API), instead of pausing it."""
    max_tool_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    """How much of one server tool's text output the model sees (the rest is cut, with a note)."""
    approval_required: frozenset[str] = frozenset()
    """Server tools whose calls wait for the caller's approval before they run."""
    tool_input_shields: list[Shield] = field(default_factory=list)
    """Shields that check a server tool call's arguments before the tool runs."""
    tool_output_shields: list[Shield] = field(default_factory=list)
    """Shields that check a server tool's result before the model reads it."""
    unlisted: tuple[UnlistedTools, ...] = ()
    """Toolgroups whose tools could not be listed: the turn runs without them, and the model is told."""
    context: ContextPolicy = ContextPolicy()
    """How the history is kept within the model's context (``context_fit.py``)."""
    memory: str = ""
    """The agent's memory blocks as its system message shows them (``tools/memory.py``; empty: none)."""

    def tool_defs(self) -> list[ToolDef]:
        """Every tool offered to the model."""
        return [bound.as_tool_def() for bound in self.server_tools.values()] + list(self.client_tools.values())

    def chat_request(self, history: list[Message]) -> ChatRequest:
        """The model request for the next inference step."""
        messages: list[Message] = []
        notes = [self.instructions, self.memory, system_note(self.unlisted) if self.unlisted else ""]
        system = "\n\n".join(filter(None, notes))
        if system:
            messages.append(SystemMessage(content=system))
        messages.extend(history)
        choice = self.tool_choice
        return ChatRequest(
            model=self.model,
            messages=messages,
            tools=self.tool_defs() if choice != "none" else [],
            tool_choice=choice,
            sampling=self.sampling,
            response_format=self.response_format,
            provider_data=self.provider_data,
        )


async def build_plan(
    config: AgentConfig,
    overrides: TurnOverrides,
    tools: ToolRegistry,
    shields: ShieldRegistry,
    provider_data: dict[str, Any] | None = None,
    offline: bool = False,
) -> TurnPlan:
    """Merge an agent's config with a turn's overrides.

    ``provider_data`` (the request's, kept on the plan) carries credentials of the servers that list
    registered toolgroups; ``offline`` checks those groups exist without listing their tools (an agent's
    creation: its turns list them with their own credentials).

    A registered toolgroup whose tools cannot be listed now (its MCP server is down) is left out of the
    plan's tools and named in its ``unlisted``.

    Raises:
        InvalidRequestError: unknown toolgroups or shields, or a tool name that is
            both a server tool and a client tool.
    """
    server_tools, held, unlisted = await _server_tools(config, overrides, tools, provider_data, offline)
    client_tools = {tool.name: tool for tool in config.client_tools or []}
    clash = sorted(set(server_tools) & set(client_tools))
    if clash:
        raise InvalidRequestError(f"tool name(s) {', '.join(clash)} are both server and client tools", "client_tools")
    tool_config = overrides.tool_config or config.tool_config or ToolConfig()
    return TurnPlan(
        model=config.model,
        instructions=config.instructions,
        sampling=sampling_of(config.sampling_params),
        tool_choice=tool_config.tool_choice,
        response_format=config.response_format,
        max_infer_iters=config.max_infer_iters or 10,
        server_tools=server_tools,
        client_tools=client_tools,
        input_shields=await shields.resolve(config.input_shields or [], "input_shields"),
        output_shields=await shields.resolve(config.output_shields or [], "output_shields"),
        tool_input_shields=await shields.resolve(config.tool_input_shields or [], "tool_input_shields"),
        tool_output_shields=await shields.resolve(config.tool_output_shields or [], "tool_output_shields"),
        max_tool_output_chars=tools.max_output_chars,
        approval_required=held,
        provider_data=provider_data,
        unlisted=unlisted,
        context=_context_policy(config),
    )


def _context_policy(config: AgentConfig) -> ContextPolicy:
    settings = config.context_management
    if settings is None:
        return ContextPolicy()
    return ContextPolicy(settings.strategy, settings.compact_threshold)


async def _server_tools(
    config: AgentConfig,
    overrides: TurnOverrides,
    tools: ToolRegistry,
    provider_data: dict[str, Any] | None,
    offline: bool,
) -> tuple[dict[str, BoundTool], frozenset[str], tuple[UnlistedTools, ...]]:
    """The turn's server tools, those held back for approval, and the toolgroups that could not be listed.

    A tool waits for approval when the agent's ``require_approval`` or the toolgroup
    reference that brought it says so (a stricter setting wins).
    """
    agent_policy = ApprovalPolicy.of(config.require_approval)
    server_tools: dict[str, BoundTool] = {}
    held: set[str] = set()
    unlisted: dict[str, UnlistedTools] = {}
    for ref in [*(config.toolgroups or []), *overrides.toolgroups]:
        try:
            resolved = await tools.resolve([ref], provider_data, offline)
        except ToolsUnlistedError as exc:
            unlisted.setdefault(exc.toolgroup_id, UnlistedTools(exc.toolgroup_id, exc.reason))
            continue
        server_tools.update(resolved)
        ref_policy = ApprovalPolicy.of(ref.require_approval if isinstance(ref, ToolGroupWithArgs) else None)
        held |= {name for name in resolved if agent_policy.requires(name) or ref_policy.requires(name)}
    return server_tools, frozenset(held), tuple(unlisted.values())
