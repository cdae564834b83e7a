"""How much of its model's context an agent's memory may take: the memory tool's limit, and memory shown cut.

The memory section sits in the system message, which no context strategy can
shorten: memory grown past the model's context would fail every turn of the
agent. So it may take at most ``memory.max_context_share`` of the context of
the turn's model (where that size is known, :mod:`ferryman.inference.context`),
counted as the model's provider counts a prompt. The ``memory`` tool refuses an
edit past it (:meth:`MemoryBudget.check`, whose message the model reads);
memory already past it (written through the API, or a smaller model since) is
shown cut to it with a note saying so (:meth:`MemoryBudget.render`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ferryman.api.content import SystemMessage
from ferryman.errors import InvalidRequestError
from ferryman.inference.base import ChatRequest, PromptSize
from ferryman.inference.context import ContextModel
from ferryman.tools.memory import TOOL_NAME, PromptBlock, memory_prompt

CUT_TRIES = 4
"""How often a cut is shortened again when the cut memory still counts over its share (tags, the note)."""
_MARGIN = 0.9
"""Each cut aims this far under the share: counts are not proportional to characters."""


class MemoryBudget:
    """The memory's share of each model's context.

    Args:
        models: The model router (context sizes and prompt counts).
        share: ``memory.max_context_share``.
    """

    def __init__(self, models: ContextModel, share: float) -> None:
        self._models = models
        self._share = share

    def tokens(self, model: str) -> int | None:
        """The most tokens ``model``'s memory section may take (None: the model's context size is unknown)."""
        window = self._models.context_window(model)
        return None if window is None else int(window.tokens * self._share)

    async def check(self, model: str, blocks: Sequence[PromptBlock]) -> None:
        """Refuse memory whose section would take more than its share of ``model``'s context.

        Raises:
            InvalidRequestError: naming the share, the section's size and the setting.
        """
        budget = self.tokens(model)
        if budget is None:
            return
        size = await self._size(model, memory_prompt(blocks, editable=True), budget)
        if size.tokens > budget:
            raise InvalidRequestError(
                f"this edit would make your memory {_counted(size)}, more than the {budget} tokens it may take of "
                f"model '{model}''s context (memory.max_context_share {self._share}); shorten your memory blocks "
                f"first (replace long passages with short ones, or with nothing)",
                "value",
            )

    async def render(self, model: str, blocks: Sequence[PromptBlock], editable: bool) -> str:
        """The memory section of ``model``'s system message, cut to its share with a note when it is longer."""
        text = memory_prompt(blocks, editable)
        budget = self.tokens(model)
        if budget is None or not blocks:
            return text
        size = await self._size(model, text, budget)
        total = sum(len(block.value) for block in blocks)
        keep = total
        for _ in range(CUT_TRIES):
            if size.tokens <= budget and not size.at_least:
                return text
            keep = min(keep - 1, int(keep * budget / max(size.tokens, 1) * _MARGIN))
            text = memory_prompt(_cut(blocks, max(keep, 0)), editable, self._note(total, max(keep, 0), editable))
            size = await self._size(model, text, budget)
        if size.tokens <= budget and not size.at_least:
            return text
        return memory_prompt([], editable, self._note(total, 0, editable))

    async def _size(self, model: str, text: str, budget: int) -> PromptSize:
        return await self._models.prompt_size(ChatRequest(model, [SystemMessage(content=text)]), budget)

    def _note(self, total: int, shown: int, editable: bool) -> str:
        fix = f" Shorten them with the `{TOOL_NAME}` tool." if editable else ""
        return (
            f"Your memory blocks are longer than this model's context allows (memory.max_context_share "
            f"{self._share}): {total - shown} of their {total} characters are not shown.{fix}"
        )


def _cut(blocks: Sequence[PromptBlock], keep: int) -> list[PromptBlock]:
    """The blocks with at most ``keep`` characters of values, the earliest blocks first (later ones empty)."""
    cut = []
    for block in blocks:
        value = block.value[: max(keep, 0)]
        keep -= len(value)
        cut.append(PromptBlock(block.label, value, block.description))
    return cut


def _counted(size: PromptSize) -> str:
    return f"{'at least ' if size.at_least else ''}{size.tokens} tokens ({size.method})"
