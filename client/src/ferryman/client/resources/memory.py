"""``client.memory``: an agent's memory blocks, read, written with compare-and-set, versioned and deleted."""

from __future__ import annotations

import builtins

from ferryman.api.memory import MemoryBlock, MemoryBlockVersion

from .._parsing import body, data_of, model, nothing
from .._transport import Call, RequestPlan, path
from ._base import AsyncResource, SyncResource

_MEMORY = "/v1/agents/{}/memory"
_BLOCK = "/v1/agents/{}/memory/{}"


def _list(agent_id: str) -> Call[list[MemoryBlock]]:
    return Call(RequestPlan("GET", path(_MEMORY, agent_id)), data_of(MemoryBlock))


def _get(agent_id: str, label: str) -> Call[MemoryBlock]:
    return Call(RequestPlan("GET", path(_BLOCK, agent_id, label)), model(MemoryBlock))


def _set(agent_id: str, label: str, value: str, description: str | None, version: int | None) -> Call[MemoryBlock]:
    sent = body(value=value, description=description, version=version)
    return Call(RequestPlan("PUT", path(_BLOCK, agent_id, label), json=sent), model(MemoryBlock))


def _delete(agent_id: str, label: str) -> Call[None]:
    return Call(RequestPlan("DELETE", path(_BLOCK, agent_id, label)), nothing)


def _versions(agent_id: str, label: str) -> Call[list[MemoryBlockVersion]]:
    return Call(RequestPlan("GET", path(_BLOCK + "/versions", agent_id, label)), data_of(MemoryBlockVersion))


class Memory(SyncResource):
    """``client.memory``: ``list``, ``get``, ``set``, ``delete`` and ``versions`` of an agent's memory blocks."""

    def list(self, agent_id: str) -> builtins.list[MemoryBlock]:
        """The agent's memory blocks, in creation order."""
        return self._transport.call(_list(agent_id))

    def get(self, agent_id: str, label: str) -> MemoryBlock:
        """One block (``NotFoundError`` when it is missing)."""
        return self._transport.call(_get(agent_id, label))

    def set(
        self, agent_id: str, label: str, value: str, *, description: str | None = None, version: int | None = None
    ) -> MemoryBlock:
        """Create the block, or write a new version of it.

        Args:
            agent_id: The agent.
            label: The block's label.
            value: Its new text.
            description: What it is for (None: unchanged).
            version: The version this write replaces: ``ConflictError`` when the block is at another one now.
        """
        return self._transport.call(_set(agent_id, label, value, description, version))

    def delete(self, agent_id: str, label: str) -> None:
        """Delete a block with its versions."""
        self._transport.call(_delete(agent_id, label))

    def versions(self, agent_id: str, label: str) -> builtins.list[MemoryBlockVersion]:
        """A block's current and earlier versions kept, newest first."""
        return self._transport.call(_versions(agent_id, label))


class AsyncMemory(AsyncResource):
    """``client.memory`` of the async client: the methods of :class:`Memory`, awaited."""

    async def list(self, agent_id: str) -> builtins.list[MemoryBlock]:
        """The agent's memory blocks, in creation order."""
        return await self._transport.call(_list(agent_id))

    async def get(self, agent_id: str, label: str) -> MemoryBlock:
        """One block (``NotFoundError`` when it is missing)."""
        return await self._transport.call(_get(agent_id, label))

    async def set(
        self, agent_id: str, label: str, value: str, *, description: str | None = None, version: int | None = None
    ) -> MemoryBlock:
        """Create the block, or write a new version of it (see :meth:`Memory.set`)."""
        return await self._transport.call(_set(agent_id, label, value, description, version))

    async def delete(self, agent_id: str, label: str) -> None:
        """Delete a block with its versions."""
        await self._transport.call(_delete(agent_id, label))

    async def versions(self, agent_id: str, label: str) -> builtins.list[MemoryBlockVersion]:
        """A block's current and earlier versions kept, newest first."""
        return await self._transport.call(_versions(agent_id, label))
