"""Agent memory: an agent's labelled blocks, read and written under ``/v1/agents/{agent_id}/memory``.

Every route reads the agent as the caller first: an agent it may not read is a
404, and so are its blocks; ``PUT`` and ``DELETE`` also need ``update`` on the
agent (403). ``PUT`` creates a block or writes a new version of it; a body
naming a ``version`` is a compare-and-set (409 when the block moved on).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.memory import (
    MemoryBlock,
    MemoryBlockDeleted,
    MemoryBlockList,
    MemoryBlockVersionList,
    PutMemoryBlockRequest,
)
from ferryman.auth.principal import current_principal

from .contract import Endpoint
from .http import JSONModelResponse, parse_body, services


async def list_blocks(request: Request) -> Response:
    """The agent's memory blocks the caller may read."""
    blocks = await services(request).agent_memory.blocks(current_principal.get(), request.path_params["agent_id"])
    return JSONModelResponse(MemoryBlockList(data=blocks))


async def get_block(request: Request) -> Response:
    """One memory block."""
    params = request.path_params
    block = await services(request).agent_memory.get(current_principal.get(), params["agent_id"], params["label"])
    return JSONModelResponse(block)


async def put_block(request: Request) -> Response:
    """Create a memory block, or write a new version of it."""
    body = await parse_body(request, PutMemoryBlockRequest)
    params = request.path_params
    memory = services(request).agent_memory
    return JSONModelResponse(await memory.put(current_principal.get(), params["agent_id"], params["label"], body))


async def delete_block(request: Request) -> Response:
    """Delete a memory block with its versions."""
    params = request.path_params
    await services(request).agent_memory.delete(current_principal.get(), params["agent_id"], params["label"])
    return JSONModelResponse(MemoryBlockDeleted(agent_id=params["agent_id"], label=params["label"]))


async def list_versions(request: Request) -> Response:
    """A memory block's versions, newest first."""
    params = request.path_params
    found = await services(request).agent_memory.versions(current_principal.get(), params["agent_id"], params["label"])
    return JSONModelResponse(MemoryBlockVersionList(data=found))


_MEMORY = "Agent memory"
_BLOCK = "/agents/{agent_id}/memory/{label}"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("GET", "/agents/{agent_id}/memory", list_blocks, "List an agent's memory blocks", _MEMORY,
             response=MemoryBlockList, errors=(404,)),
    Endpoint("GET", _BLOCK, get_block, "Get a memory block", _MEMORY, response=MemoryBlock, errors=(400, 404)),
    Endpoint("PUT", _BLOCK, put_block, "Create a memory block or write a new version of it", _MEMORY,
             PutMemoryBlockRequest, MemoryBlock, errors=(400, 403, 404, 409),
             example={"value": "The user's name is Ada.", "description": "What I know about the user"}),
    Endpoint("DELETE", _BLOCK, delete_block, "Delete a memory block", _MEMORY, response=MemoryBlockDeleted,
             errors=(403, 404)),
    Endpoint("GET", f"{_BLOCK}/versions", list_versions, "List a memory block's versions", _MEMORY,
             response=MemoryBlockVersionList, errors=(404,)),
)  # fmt: skip
"""The agent memory routes."""
