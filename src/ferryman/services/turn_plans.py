"""A turn's plan: its agent's config with the turn's overrides and the agent's memory blocks, checked against the
model's context before the turn runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from ferryman.api.agents import Agent
from ferryman.api.content import Message, TurnInputMessage
from ferryman.auth.principal import current_principal
from ferryman.engine.context_fit import minimal_fit
from ferryman.engine.plan import TurnOverrides, TurnPlan, build_plan
from ferryman.inference.context import check_context
from ferryman.inference.router import ModelRouter
from ferryman.safe_fetch import FetchPolicy
from ferryman.safety.base import ShieldRegistry
from ferryman.storage.base import ReadAlong
from ferryman.tools.memory import TOOL_NAME
from ferryman.tools.registry import ToolRegistry

from .agent_memory import AgentMemory
from .session_memory import SessionMemory

Messages = Callable[[], Awaitable[list[Message]]]
"""The whole prompt's messages (the history before the turn, then its input), read only when a check needs them."""


@dataclasses.dataclass(frozen=True)
class TurnInputs:
    """What a turn's plan and input are made with.

    Attributes:
        models: The model router, to check a turn's first prompt fits its model's context.
        tools: Server-side toolgroups.
        shields: Registered shields.
        fetch: What a turn's document URLs may reach.
        memory: Indexes a turn's documents too large to inline in its session's vector store (None: all inline).
        inline_document_tokens: The documents' size in tokens above which they are retrieved from.
        blocks: The agents' memory blocks, shown in each turn's system message (None: agents have no memory).
    """

    models: ModelRouter
    tools: ToolRegistry
    shields: ShieldRegistry
    fetch: FetchPolicy
    memory: SessionMemory | None
    inline_document_tokens: int
    blocks: AgentMemory | None


class TurnPlans:
    """Plans turns and checks their first prompt fits.

    Args:
        inputs: What a turn's plan and input are made with.
    """

    def __init__(self, inputs: TurnInputs) -> None:
        self._inputs = inputs

    async def bare(self, agent: Agent, overrides: TurnOverrides, provider_data: dict[str, Any] | None) -> TurnPlan:
        """What a run of the agent's turn does with the turn's own overrides, before its memory is added."""
        inputs = self._inputs
        return await build_plan(agent.agent_config, overrides, inputs.tools, inputs.shields, provider_data)

    async def remembering(self, agent_id: str, plan: TurnPlan) -> TurnPlan:
        """The plan with the agent's memory blocks, as they are now, in its system message."""
        blocks = self._inputs.blocks
        if blocks is None:
            return plan
        memory = await blocks.prompt(current_principal.get(), agent_id, plan.model, TOOL_NAME in plan.server_tools)
        return dataclasses.replace(plan, memory=memory)

    def memory_read(self, agent_id: str) -> ReadAlong | None:
        """The read of the agent's memory blocks the caller may read, to send with the turn's start (one trip for
        both); None when agents have no memory."""
        blocks = self._inputs.blocks
        return None if blocks is None else blocks.reading(current_principal.get(), agent_id)

    async def remembered(self, plan: TurnPlan, read: ReadAlong | None) -> TurnPlan:
        """The plan with the memory blocks ``read`` found (:meth:`memory_read`, answered)."""
        blocks = self._inputs.blocks
        if blocks is None or read is None:
            return plan
        memory = await blocks.prompt_from(read, plan.model, TOOL_NAME in plan.server_tools)
        return dataclasses.replace(plan, memory=memory)

    async def check(self, plan: TurnPlan, inputs: list[TurnInputMessage], whole: Messages) -> None:
        """Refuse a turn whose first prompt cannot fit its model's context.

        With the agent's ``truncation`` or ``compaction`` (``context_fit.py``) only the instructions, tools and
        the turn's input must fit; with ``disabled``, the whole history too (``whole``, read only then, and only
        when the model's context size is known).

        Raises:
            ContextLengthExceededError: it cannot fit.
        """
        models = self._inputs.models
        if models.context_window(plan.model) is None:
            return
        if plan.context.strategy != "disabled":
            await minimal_fit(models, plan.chat_request, list(inputs))
            return
        await check_context(models, plan.chat_request(await whole()))
