"""The schema, fixtures and helpers the kernel contract suite (``test_kernel_contract*.py``) shares.

The semantics checked are those of :mod:`ferryman.storage.kernel.ops`'s docstrings; the in-memory kernel is
their reference. Every test runs on a fresh database of each backend in ``kernel_backends.BACKENDS``, with this
module's own schema: agent > session > turn (one ``in_progress`` per session; two logs) > step (indexed), and
responses (a chain), conversations and items (under either).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kernel_backends import BACKENDS, TWINS

from ferryman.storage.kernel.model import Kind, Owner, Schema
from ferryman.storage.kernel.ops import Append, Op, Page, Put
from ferryman.storage.kernel.protocol import Kernel

AGENT = Kind("agent")
SESSION = Kind("session", parents=("agent",))
TURN = Kind("turn", parents=("session",), exclusive=frozenset({"in_progress"}), logs=("events", "messages"))
STEP = Kind("step", parents=("turn",), indexes=("pending",))
RESPONSE = Kind("response", indexes=("previous_response_id", "turn_id"), logs=("events",))
CONVERSATION = Kind("conversation")
ITEM = Kind("item", parents=("conversation", "response"))
SCHEMA = Schema([AGENT, SESSION, TURN, STEP, RESPONSE, CONVERSATION, ITEM])

ALICE = Owner("api_key", "alice", {"teams": ("red", "blue"), "roles": ("admin",)})
BOB = Owner("subject", "bob", {"teams": ("green",)})
CAROL = Owner("api_key", "carol")


@pytest.fixture(name="backend", params=list(BACKENDS))
def backend_fixture(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(name="kernel")
async def kernel_fixture(backend: str, tmp_path: Path) -> AsyncIterator[Kernel]:
    async with BACKENDS[backend](tmp_path, SCHEMA) as opened:
        yield opened


@pytest.fixture(name="twin")
async def twin_fixture(backend: str, kernel: Kernel) -> AsyncIterator[Kernel]:
    """A second kernel over the same database where the backend has one, else the same kernel."""
    if backend not in TWINS:
        yield kernel
        return
    async with TWINS[backend](kernel, SCHEMA) as opened:
        yield opened


async def one(kernel: Kernel, op: Op) -> Any:
    return (await kernel.write([op]))[0]


async def page_ids(kernel: Kernel, op: Page) -> list[str]:
    result = (await kernel.read([op]))[0]
    return [rec.id for rec in result.items]


async def tree(kernel: Kernel) -> None:
    """agent a1 > session s1 > turns t1 (completed), t2 (in_progress) > steps; a2 > s2; a root session s0."""
    await kernel.write(
        [
            Put(AGENT, "a1", {"name": "one"}, owner=ALICE),
            Put(AGENT, "a2", {"name": "two"}, owner=BOB),
            Put(SESSION, "s1", {}, parent="a1"),
            Put(SESSION, "s2", {}, parent="a2"),
            Put(SESSION, "s0", {}),
            Put(TURN, "t1", {}, parent="s1", status="completed"),
            Put(TURN, "t2", {}, parent="s1", status="in_progress", lease_until=50.0),
            Put(STEP, "p1", {"pending": True}, parent="t1"),
            Put(STEP, "p2", {"pending": False}, parent="t2"),
            Append(TURN, "t1", "events", ("e0", "e1")),
            Append(TURN, "t2", "messages", ("m0",)),
        ]
    )
