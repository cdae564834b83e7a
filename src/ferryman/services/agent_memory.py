"""Agents' memory blocks as one caller sees them: read, written and versioned through the access policy.

A block belongs to an agent: every operation first reads the agent as the
caller (an agent it may not read is missing, and so are its blocks), then the
block through :class:`~ferryman.services.access.Access` (a block it may not
read is missing too). Creating, writing or deleting a block also needs
``update`` on the agent, through the API and the memory tool alike: the blocks
are part of the agent's system message, which a reader of the agent must not
change. A write names the version it replaces or not; either way it is one
compare-and-set in storage, so two writers never lose each other's change
silently: the one that read a stale version gets a 409 (a write naming no
version is read and written again instead).

The count of an agent's blocks is checked before a create and again after it:
of creates that raced past ``memory.max_blocks``, the later ones are undone
and refused. So is a block created while its agent was being deleted.

The same service is the memory tool's :class:`~ferryman.tools.memory.BlockEditor`
(as the turn's caller) and renders an agent's blocks for its system message,
within their share of the model's context (:mod:`.memory_budget`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime

from ferryman.api.agents import Agent
from ferryman.api.memory import (
    LABEL_PATTERN,
    MAX_LABEL_CHARS,
    MemoryBlock,
    MemoryBlockVersion,
    PutMemoryBlockRequest,
)
from ferryman.auth.principal import Principal, current_principal
from ferryman.config import MemorySettings
from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError
from ferryman.inference.context import ContextModel
from ferryman.storage.base import ReadAlong, Store
from ferryman.storage.domain.kinds import MEMORY_BLOCK
from ferryman.storage.domain.memory_blocks import BlockRecord, BlockVersion, MemoryBlocks, block_id
from ferryman.storage.kernel.filters import Filter
from ferryman.tools.memory import PromptBlock, memory_prompt

from .access import Access
from .agent_records import AgentRecords
from .memory_budget import MemoryBudget

EDIT_TRIES = 3
"""How often a write naming no version (the memory tool's, a ``PUT`` without ``version``) reads and writes a
block again when another writer changed it meanwhile."""
_LABEL = re.compile(LABEL_PATTERN)


class AgentMemory:
    """The memory blocks of agents.

    Args:
        store: The store, whose kernel holds the agents (read as the caller).
        blocks: The blocks' records.
        access: The access policy.
        settings: The limits (``memory.*``).
        models: The model router, for the memory's share of a model's context (None: no share is kept).
    """

    def __init__(
        self,
        store: Store,
        blocks: MemoryBlocks,
        access: Access,
        settings: MemorySettings,
        models: ContextModel | None = None,
    ) -> None:
        self._agents = AgentRecords(store.kernel, access)
        self._blocks = blocks
        self._access = access
        self._settings = settings
        self._budget = None if models is None else MemoryBudget(models, settings.max_context_share)

    async def blocks(self, who: Principal | None, agent_id: str) -> list[MemoryBlock]:
        """The agent's blocks ``who`` may read, in creation order."""
        await self._agent(who, agent_id)
        return [_wire(block) for block in await self._readable(who, agent_id)]

    async def get(self, who: Principal | None, agent_id: str, label: str) -> MemoryBlock:
        """One block.

        Raises:
            NotFoundError: the agent or the block is missing, or ``who`` may not read it.
        """
        await self._agent(who, agent_id)
        return _wire(await self._block(who, agent_id, label))

    async def versions(self, who: Principal | None, agent_id: str, label: str) -> list[MemoryBlockVersion]:
        """A block's current version and the earlier ones kept, newest first."""
        await self._agent(who, agent_id)
        block = await self._block(who, agent_id, label)
        return [_wire_version(version) for version in [block.current(), *block.earlier]]

    async def put(self, who: Principal | None, agent_id: str, label: str, body: PutMemoryBlockRequest) -> MemoryBlock:
        """Create the block, or write a new version of it (over ``body.version`` when given).

        Raises:
            NotFoundError: the agent is missing, or ``body.version`` names a block that is, or a block of the
                label exists that ``who`` may not read.
            ForbiddenError: ``who`` may read the agent but not update it.
            ConflictError: ``body.version`` is not the block's version now.
            InvalidRequestError: the label, or a limit (``memory.max_block_chars``, ``memory.max_total_chars``,
                ``memory.max_blocks``).
        """
        await self._agent(who, agent_id, write=True)
        _check_label(label)
        self._check_size(label, body.value)
        if body.version is not None:
            return _wire(await self._put_once(who, agent_id, label, body))
        for _ in range(EDIT_TRIES - 1):
            try:
                return _wire(await self._put_once(who, agent_id, label, body))
            except ConflictError:
                continue  # changed (or created) meanwhile: read it again
        return _wire(await self._put_once(who, agent_id, label, body))

    async def delete(self, who: Principal | None, agent_id: str, label: str) -> None:
        """Delete a block with its versions.

        Raises:
            NotFoundError: the agent or the block is missing, or ``who`` may not read it.
            ForbiddenError: it may read the block but not delete it, or may not update the agent.
        """
        await self._agent(who, agent_id, write=True)
        record_id = block_id(agent_id, label)
        guard = () if who is None else (self._access.guard(who, "delete", MEMORY_BLOCK, record_id),)
        with self._access.audited(who, "delete", MEMORY_BLOCK, record_id):
            existed = await self._blocks.delete(agent_id, label, before=guard)
        if not existed:
            raise NotFoundError(f"memory block '{label}' not found")
        self._access.record(who, "delete", MEMORY_BLOCK, record_id)

    async def forget(self, agent_id: str) -> None:
        """Delete every block of a deleted agent (as the server: deleting the agent was checked already)."""
        await self._blocks.delete_agent(agent_id)

    async def edit(self, agent_id: str, label: str, change: Callable[[str | None], str]) -> int:
        """Change a block as the current caller (the memory tool's edit; see :class:`BlockEditor`).

        A block another writer changed meanwhile is read again and changed again, a few times. Besides the
        limits of every write, the memory the edit leaves must fit its share of the agent's model's context
        (``memory.max_context_share``).
        """
        who = current_principal.get()
        agent = await self._agent(who, agent_id, write=True)
        _check_label(label)
        allow = self._access.filter(who, "read", MEMORY_BLOCK)
        for _ in range(EDIT_TRIES - 1):
            try:
                return await self._edit_once(who, agent, label, change, allow)
            except ConflictError:
                continue  # changed meanwhile: read it again
        return await self._edit_once(who, agent, label, change, allow)

    async def prompt(self, who: Principal | None, agent_id: str, model: str, editable: bool) -> str:
        """The memory section of the agent's system message for ``model``: its blocks ``who`` may read.

        ``editable``: the turn offers the memory tool (the section says so). Memory longer than its share of
        ``model``'s context is shown cut, with a note (:meth:`MemoryBudget.render`).
        """
        return await self._render(await self._readable(who, agent_id), model, editable)

    def reading(self, who: Principal | None, agent_id: str) -> ReadAlong:
        """The read of the agent's blocks ``who`` may read, to send with another call (a turn's start) in its
        trip; :meth:`prompt_from` renders what it found."""
        allow = self._access.filter(who, "read", MEMORY_BLOCK)
        return ReadAlong([self._blocks.of_agent_read(agent_id, allow, limit=self._settings.max_blocks)])

    async def prompt_from(self, read: ReadAlong, model: str, editable: bool) -> str:
        """:meth:`prompt`, from the blocks a :meth:`reading` found."""
        return await self._render(self._blocks.of_agent_found(read.results[0]), model, editable)

    async def _render(self, found: list[BlockRecord], model: str, editable: bool) -> str:
        blocks = [PromptBlock(b.label, b.value, b.description) for b in found]
        if self._budget is None:
            return memory_prompt(blocks, editable)
        return await self._budget.render(model, blocks, editable)

    # ---- internals -------------------------------------------------------

    async def _put_once(
        self, who: Principal | None, agent_id: str, label: str, body: PutMemoryBlockRequest
    ) -> BlockRecord:
        found = await self._blocks.find(agent_id, label, self._access.filter(who, "read", MEMORY_BLOCK))
        if found is None:
            if body.version is not None:
                raise NotFoundError(f"memory block '{label}' not found")
            return await self._create(who, agent_id, label, body.value, body.description)
        current = found.value
        if body.version is not None and body.version != current.version:
            raise ConflictError(f"memory block '{label}' is at version {current.version}, not {body.version}")
        description = current.description if body.description is None else body.description
        return await self._write(who, current, body.value, description)

    async def _edit_once(
        self, who: Principal | None, agent: Agent, label: str, change: Callable[[str | None], str], allow: Filter
    ) -> int:
        found = await self._blocks.find(agent.agent_id, label, allow)
        value = change(None if found is None else found.value.value)
        self._check_size(label, value)
        if self._budget is not None:
            blocks = [PromptBlock(b.label, value if b.label == label else b.value, b.description)
                      for b in await self._readable(who, agent.agent_id)]  # fmt: skip
            if found is None:
                blocks.append(PromptBlock(label, value))
            await self._budget.check(agent.agent_config.model, blocks)
        if found is None:
            return (await self._create(who, agent.agent_id, label, value, None)).version
        return (await self._write(who, found.value, value, found.value.description)).version

    async def _agent(self, who: Principal | None, agent_id: str, write: bool = False) -> Agent:
        """The agent as ``who`` reads it; with ``write``, also checked that ``who`` may update it."""
        found = await self._agents.stored(who, agent_id)
        if write:
            self._agents.allow(who, found, "update")
        return found.value

    async def _readable(self, who: Principal | None, agent_id: str) -> list[BlockRecord]:
        allow = self._access.filter(who, "read", MEMORY_BLOCK)
        return await self._blocks.of_agent(agent_id, allow, limit=self._settings.max_blocks)

    async def _block(self, who: Principal | None, agent_id: str, label: str) -> BlockRecord:
        allow = self._access.filter(who, "read", MEMORY_BLOCK)
        found = await self._blocks.find(agent_id, label, allow)
        if found is None:
            raise NotFoundError(f"memory block '{label}' not found")
        return found.value

    async def _create(
        self, who: Principal | None, agent_id: str, label: str, value: str, description: str | None
    ) -> BlockRecord:
        record_id = block_id(agent_id, label)
        self._access.check(who, "create", MEMORY_BLOCK, record_id)
        held = await self._blocks.of_agent(agent_id)
        if len(held) >= self._settings.max_blocks:
            raise self._too_many(agent_id, len(held))
        self._check_total(held, label, value)
        now = _now()
        block = BlockRecord(agent_id=agent_id, label=label, value=value, description=description, version=1,
                            created_at=now, updated_at=now)  # fmt: skip
        try:
            await self._blocks.create(block, self._access.owner(who))
        except ConflictError:
            if await self._blocks.find(agent_id, label, self._access.filter(who, "read", MEMORY_BLOCK)) is None:
                raise NotFoundError(f"memory block '{label}' not found") from None  # another's: never say it exists
            raise
        await self._undo_if_raced(agent_id, label)
        self._access.record(who, "create", MEMORY_BLOCK, record_id)
        return block

    async def _undo_if_raced(self, agent_id: str, label: str) -> None:
        """Undo a create that raced past ``memory.max_blocks``, or with the deletion of its agent."""
        held = [b.label for b in await self._blocks.of_agent(agent_id)]
        if label in held[: self._settings.max_blocks]:
            try:
                await self._agents.get(None, agent_id)  # as the server: is the agent there at all
                return
            except NotFoundError:
                await self._blocks.delete(agent_id, label)
                raise
        await self._blocks.delete(agent_id, label)
        raise self._too_many(agent_id, len(held) - 1)

    def _too_many(self, agent_id: str, held: int) -> InvalidRequestError:
        return InvalidRequestError(
            f"agent '{agent_id}' holds {held} memory blocks, the most memory.max_blocks allows", "label"
        )

    def _check_total(self, held: list[BlockRecord], label: str, value: str) -> None:
        total = sum(len(block.value) for block in held if block.label != label) + len(value)
        most = self._settings.max_total_chars
        if total > most:
            raise InvalidRequestError(
                f"the agent's memory blocks would hold {total} characters in all; memory.max_total_chars is {most}",
                "value",
            )

    async def _write(
        self, who: Principal | None, current: BlockRecord, value: str, description: str | None
    ) -> BlockRecord:
        record_id = block_id(current.agent_id, current.label)
        self._check_total(await self._blocks.of_agent(current.agent_id), current.label, value)
        earlier = [current.current(), *current.earlier][: self._settings.max_versions]
        block = current.model_copy(
            update={"value": value, "description": description, "version": current.version + 1,
                    "updated_at": _now(), "earlier": earlier}
        )  # fmt: skip
        guard = () if who is None else (self._access.guard(who, "update", MEMORY_BLOCK, record_id),)
        with self._access.audited(who, "update", MEMORY_BLOCK, record_id):
            await self._blocks.replace(block, current.version, before=guard)
        return block

    def _check_size(self, label: str, value: str) -> None:
        most = self._settings.max_block_chars
        if len(value) > most:
            raise InvalidRequestError(
                f"memory block '{label}' would hold {len(value)} characters; memory.max_block_chars is {most}", "value"
            )


def _check_label(label: str) -> None:
    if len(label) > MAX_LABEL_CHARS or not _LABEL.match(label):
        raise InvalidRequestError(
            f"a memory block's label is 1-{MAX_LABEL_CHARS} letters, digits, '_', '.' or '-', starting with a letter "
            "or digit",
            "label",
        )


def _now() -> float:
    return datetime.now(UTC).timestamp()


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _wire(block: BlockRecord) -> MemoryBlock:
    return MemoryBlock(
        agent_id=block.agent_id,
        label=block.label,
        value=block.value,
        description=block.description,
        version=block.version,
        created_at=_time(block.created_at),
        updated_at=_time(block.updated_at),
    )


def _wire_version(version: BlockVersion) -> MemoryBlockVersion:
    return MemoryBlockVersion(
        version=version.version, value=version.value, description=version.description,
        updated_at=_time(version.updated_at),
    )  # fmt: skip
