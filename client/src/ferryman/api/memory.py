"""Agent memory (``/v1/agents/{agent_id}/memory``): labelled text blocks an agent reads every turn and edits.

Each block has a label unique within its agent, a text value and an optional
description (what the block is for, shown to the model beside it). Every change
makes a new version; a write that names the version it read is refused (409)
when the block changed since. The server bounds the value's size, the number of
blocks per agent, their values' total size and how many earlier versions are kept (``memory.*`` settings).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from .limits import MAX_MESSAGE_CHARS, AtMost

MAX_LABEL_CHARS = 64
LABEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
"""A label: letters, digits, ``_``, ``.`` and ``-``, starting with a letter or digit (it names a path segment)."""
MAX_DESCRIPTION_CHARS = 1024

Label = Annotated[str, Field(min_length=1, pattern=LABEL_PATTERN), AtMost(MAX_LABEL_CHARS)]
"""A block's label."""
BlockText = Annotated[str, AtMost(MAX_MESSAGE_CHARS)]
"""A block's value (the server's ``memory.max_block_chars`` bounds it further)."""
Description = Annotated[str, AtMost(MAX_DESCRIPTION_CHARS)]


class MemoryBlock(BaseModel):
    """One block of an agent's memory, as it is now.

    Attributes:
        agent_id: The agent it belongs to.
        label: Its name, unique within the agent.
        value: Its text, as the model reads it.
        description: What it is for (shown to the model beside it).
        version: 1 when created, one more on every change.
        created_at: When it was created.
        updated_at: When its current version was written.
    """

    object: Literal["memory_block"] = "memory_block"
    agent_id: str
    label: str
    value: str
    description: str | None = None
    version: int = Field(ge=1)
    created_at: datetime
    updated_at: datetime


class MemoryBlockList(BaseModel):
    """An agent's memory blocks, in creation order."""

    object: Literal["list"] = "list"
    data: list[MemoryBlock]


class PutMemoryBlockRequest(BaseModel):
    """Create a block, or replace the value of an existing one.

    Attributes:
        value: The block's new text.
        description: What the block is for; omitted: unchanged (none for a new block).
        version: The version the write replaces (compare-and-set): a block at another version is a 409, and a
            missing one a 404. Omitted: the block is created, or replaced whatever its version.
    """

    value: BlockText
    description: Description | None = None
    version: int | None = Field(default=None, ge=1)


class MemoryBlockDeleted(BaseModel):
    """Answer to a block's delete."""

    object: Literal["memory_block.deleted"] = "memory_block.deleted"
    agent_id: str
    label: str
    deleted: bool = True


class MemoryBlockVersion(BaseModel):
    """One version of a block: its current one or an earlier one kept.

    Attributes:
        version: Its number.
        value: The block's text at that version.
        description: Its description at that version.
        updated_at: When that version was written.
    """

    object: Literal["memory_block.version"] = "memory_block.version"
    version: int = Field(ge=1)
    value: str
    description: str | None = None
    updated_at: datetime


class MemoryBlockVersionList(BaseModel):
    """A block's versions, newest (its current one) first; the oldest are dropped past ``memory.max_versions``."""

    object: Literal["list"] = "list"
    data: list[MemoryBlockVersion]
