"""A new owned kind of record adds no backend code: declared here, in a test, it works on every backend.

``PROMPT`` is not in the server's schema and no backend has heard of it: the
kind is one declaration, and :class:`Records` over it creates, reads, lists by
an index and by owner, and deletes, with each record's owner, on every kernel of
``kernel_backends.BACKENDS`` (the reference, SQLite, PostgreSQL and Redis).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kernel_backends import BACKENDS
from pydantic import BaseModel

from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.domain.records import ModelCodec, Records
from ferryman.storage.kernel.filters import IdIn, Or, Terms
from ferryman.storage.kernel.model import Kind, Owner, Schema, attribute_term, principal_term

pytestmark = pytest.mark.anyio

PROMPT = Kind("prompt", indexes=("topic",))
"""The whole declaration of the new kind: its name and one indexed field."""
WITH_PROMPTS = Schema([*SCHEMA.kinds.values(), PROMPT])

ALICE = Owner("subject", "alice", {"teams": ("red",)})
BOB = Owner("api_key", "bob", {"teams": ("blue",), "roles": ("writer",)})


class Prompt(BaseModel):
    prompt_id: str
    topic: str
    text: str


def prompt(prompt_id: str, topic: str = "greeting") -> Prompt:
    return Prompt(prompt_id=prompt_id, topic=topic, text=f"the text of {prompt_id}")


def mine(owner: Owner) -> Terms:
    return Terms(frozenset({principal_term(owner.key)}))


@pytest.fixture(params=list(BACKENDS))
async def prompts(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Records[Prompt]]:
    async with BACKENDS[request.param](tmp_path, WITH_PROMPTS) as kernel:
        yield Records(kernel, PROMPT, ModelCodec(Prompt), lambda p: p.prompt_id)


async def test_a_record_of_the_new_kind_reads_back_with_its_owner(prompts: Records[Prompt]) -> None:
    await prompts.create(prompt("p1"), owner=ALICE)
    await prompts.create(prompt("p0"))
    found = await prompts.find("p1")
    assert found is not None and found.value == prompt("p1") and found.rec.owner == ALICE
    unowned = await prompts.find("p0")
    assert unowned is not None and unowned.rec.owner is None
    with pytest.raises(ConflictError, match="prompt 'p1' already exists"):
        await prompts.create(prompt("p1", "other"), owner=BOB)
    assert await prompts.get("p1") == prompt("p1")


async def test_a_record_its_reader_may_not_see_is_missing(prompts: Records[Prompt]) -> None:
    await prompts.create(prompt("p1"), owner=ALICE)
    assert await prompts.get("p1", allow=mine(ALICE)) == prompt("p1")
    with pytest.raises(NotFoundError, match="prompt 'p1' not found"):
        await prompts.get("p1", allow=mine(BOB))


async def test_pages_filter_by_owner_team_index_and_id_in_creation_order(prompts: Records[Prompt]) -> None:
    await prompts.create(prompt("a1"), owner=ALICE)
    await prompts.create(prompt("b1"), owner=BOB)
    await prompts.create(prompt("a2", "farewell"), owner=ALICE)
    await prompts.create(prompt("b2", "farewell"), owner=BOB)
    await prompts.create(prompt("a3"), owner=ALICE)

    def ids(found: list[Prompt]) -> list[str]:
        return [p.prompt_id for p in found]

    assert ids(await prompts.all(allow=mine(ALICE))) == ["a1", "a2", "a3"]
    assert ids(await prompts.all(allow=Terms(frozenset({attribute_term("teams", "blue")})))) == ["b1", "b2"]
    assert ids(await prompts.all(allow=Or((mine(ALICE), IdIn(frozenset({"b2"})))))) == ["a1", "a2", "b2", "a3"]
    greetings = await prompts.page(allow=mine(ALICE), where=("topic", "greeting"), limit=1)
    assert (ids(greetings.items), greetings.has_more) == (["a1"], True)
    rest = await prompts.page(allow=mine(ALICE), where=("topic", "greeting"), after="a1", limit=1)
    assert (ids(rest.items), rest.has_more) == (["a3"], False)
    newest = await prompts.page(allow=mine(BOB), desc=True, limit=5)
    assert (ids(newest.items), newest.has_more) == (["b2", "b1"], False)


async def test_a_deleted_record_is_gone_for_everyone(prompts: Records[Prompt]) -> None:
    await prompts.create(prompt("p1"), owner=ALICE)
    await prompts.create(prompt("p2"), owner=ALICE)
    assert await prompts.delete("p1") is True
    assert await prompts.delete("p1") is False
    assert await prompts.find("p1") is None
    assert [p.prompt_id for p in await prompts.all(allow=mine(ALICE))] == ["p2"]
    await prompts.create(prompt("p1", "again"), owner=BOB)
    assert [p.prompt_id for p in await prompts.all()] == ["p2", "p1"]
