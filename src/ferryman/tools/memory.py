"""``builtin::memory``: the tool an agent edits its own memory blocks with, and how the blocks read in its prompt.

An agent's memory is a few labelled text blocks it reads in its system message
every turn (:func:`memory_prompt`) and changes with this tool: append text to a
block (a new label makes a new block) or replace a passage of one. The tool
knows no storage: it edits through a :class:`BlockEditor` (the agent memory
service), as the turn's caller. The agent is always the turn's (the tool
context's): outside an agent's turn (a response, ``/v1/tool-runtime/invoke``)
the tool refuses, since there is no agent whose memory it would be.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ferryman.api.content import ToolParameter
from ferryman.api.registry import Tool, ToolInvocationResult
from ferryman.errors import FerrymanError

from .context import tool_context

TOOLGROUP_ID = "builtin::memory"
TOOL_NAME = "memory"


@dataclass(frozen=True)
class PromptBlock:
    """A block as the model reads it."""

    label: str
    value: str
    description: str | None = None


class BlockEditor(Protocol):
    """Changes an agent's blocks as the current caller (the agent memory service)."""

    async def edit(self, agent_id: str, label: str, change: Callable[[str | None], str]) -> int:
        """Replace the block's value by ``change(value)`` (None: a block to create); the new version.

        Raises:
            FerrymanError: the agent or block cannot be read or written, or a limit refuses the new value.
            ValueError: ``change`` refuses the value (its message is the model's to read).
        """
        ...


_DEFINITION = Tool(
    identifier=TOOL_NAME,
    toolgroup_id=TOOLGROUP_ID,
    description=(
        "Change your memory blocks, which you read at the start of every conversation. "
        "'append' adds text to the end of a block (a new label makes a new block); "
        "'replace' replaces the text 'old' of a block with 'new' (an empty 'new' deletes it)."
    ),
    parameters=[
        ToolParameter(name="operation", parameter_type="string", description="'append' or 'replace'",
                      required=True),
        ToolParameter(name="label", parameter_type="string", description="The block's label, e.g. 'human'",
                      required=True),
        ToolParameter(name="text", parameter_type="string", description="For 'append': the text to add",
                      required=False),
        ToolParameter(name="old", parameter_type="string", description="For 'replace': the exact text to "
                      "replace", required=False),
        ToolParameter(name="new", parameter_type="string", description="For 'replace': the text that "
                      "replaces it", required=False),
    ],
)  # fmt: skip


class MemoryTool:
    """The ``memory`` tool of ``builtin::memory``.

    Args:
        editor: Where the blocks are changed.
    """

    def __init__(self, editor: BlockEditor) -> None:
        self._editor = editor

    @property
    def definition(self) -> Tool:
        """The tool's listing."""
        return _DEFINITION

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Append to or replace in a block of the turn's agent."""
        agent_id = tool_context.get().agent_id
        if not agent_id:
            return _refused("the memory tool edits an agent's memory: it runs only in an agent's turn")
        operation, label = arguments.get("operation"), arguments.get("label")
        if not isinstance(label, str) or not label:
            return _refused("missing string argument 'label'")
        try:
            change = _change(operation, arguments)
            version = await self._editor.edit(agent_id, label, change)
        except ValueError as exc:
            return _refused(str(exc))
        except FerrymanError as exc:
            return _refused(exc.message)
        return ToolInvocationResult(
            content=f"memory block '{label}' is now at version {version}",
            metadata={"label": label, "operation": operation, "version": version},
        )


def _change(operation: Any, arguments: dict[str, Any]) -> Callable[[str | None], str]:
    if operation == "append":
        text = arguments.get("text")
        if not isinstance(text, str) or not text:
            raise ValueError("'append' needs a non-empty string argument 'text'")
        return lambda value: f"{value}\n{text}" if value else text
    if operation == "replace":
        old, new = arguments.get("old"), arguments.get("new", "")
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise ValueError("'replace' needs a non-empty string argument 'old' and a string argument 'new'")

        def replace(value: str | None) -> str:
            if value is None:
                raise ValueError("no memory block of that label to replace text in")
            if old not in value:
                raise ValueError(f"the block does not contain {old!r}")
            return value.replace(old, new, 1)

        return replace
    raise ValueError(f"unknown operation {operation!r}: use 'append' or 'replace'")


def _refused(message: str) -> ToolInvocationResult:
    return ToolInvocationResult(error_message=message, error_code=400)


def memory_prompt(blocks: Sequence[PromptBlock], editable: bool, note: str = "") -> str:
    """The memory section of a system message (empty when there is nothing to say).

    ``note``: a line said after the introduction (that the blocks are shown cut, and why).
    """
    if not blocks and not editable and not note:
        return ""
    lines = ["# Memory", "These memory blocks persist across your conversations."]
    if editable:
        lines.append(f"Keep what you learn in them with the `{TOOL_NAME}` tool.")
    if note:
        lines.append(note)
    if not blocks:
        lines.append("You have no memory blocks yet.")
    for block in blocks:
        about = f' description="{block.description}"' if block.description else ""
        lines.append(f'<memory_block label="{block.label}"{about}>\n{block.value}\n</memory_block>')
    return "\n".join(lines)
