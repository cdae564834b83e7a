"""Kernel records whose backend keeps an anchor beside them (a vector store's index, a conversation's items).

The record and its anchor are written, and deleted, in one ``MULTI``/``EXEC``
transaction (:func:`~.redis_script.run_atomically`), the kernel's script first.
Each script refuses an id it holds, so both refuse a taken id; one alone refuses
only where an earlier write of a pair was lost, and the half this call wrote beside
the other's is then undone, not handed to the caller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from ferryman.errors import FerrymanError, NotFoundError

from .kernel import ops
from .redis.kernel import RedisKernel
from .redis_script import ScriptCall, run_atomically


def _refusal(answer: Callable[[], object]) -> FerrymanError | None:
    """The error a script's answer means, or None when it wrote."""
    try:
        answer()
    except FerrymanError as refused:
        return refused
    return None


async def create_anchored(
    client: Redis,
    kernel: RedisKernel,
    put: ops.Put,
    anchor: ScriptCall[Any, Any],
    undo_anchor: Callable[[], Awaitable[object]],
) -> None:
    """Write a new record and its anchor together.

    Args:
        client: The deployment's client.
        kernel: The kernel the record is written through.
        put: The record's create.
        anchor: The script writing the anchor.
        undo_anchor: Deletes the anchor, when the record alone was refused.

    Raises:
        FerrymanError: what either script refused with (a taken id: ``ConflictError``).
    """
    answers = await run_atomically(client, kernel.write_call([put]), anchor)
    refusals = [_refusal(answer) for answer in answers]
    if refusals == [None, None]:
        return
    if refusals[0] is None:
        await kernel.write([ops.Delete(put.kind, put.id)])
    if refusals[1] is None:
        await undo_anchor()
    raise next(refusal for refusal in refusals if refusal is not None)


async def delete_anchored(client: Redis, kernel: RedisKernel, delete: ops.Delete, anchor: ScriptCall[Any, Any]) -> bool:
    """Delete a record and its anchor together; whether the record existed (the record says whether the pair
    did: an anchor missing beside it was lost with an earlier write, and is not an error).

    Raises:
        FerrymanError: what the anchor's script raised, but for its ``NotFoundError``.
    """
    deleted, anchor_deleted = await run_atomically(client, kernel.write_call([delete]), anchor)
    existed = bool(kernel.write_results([delete], deleted())[0])
    try:
        anchor_deleted()
    except NotFoundError:
        if not existed:
            raise
    return existed
