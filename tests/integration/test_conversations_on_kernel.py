"""Conversations as kernel records, through :class:`ConversationService` on SQLite, PostgreSQL and Redis.

A conversation's record holds its owner, written with its anchor and first items in one transaction; a caller
reads, pages, changes and deletes only what the access policy lets it (another's conversation looks missing,
for the conversation and for its items), and a page is filtered in the kernel's query: one read, however many
conversations others own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from storage_backends import BACKENDS
from test_files_on_kernel import ALICE, BOB, CAROL, TEAM_READS  # the callers and the team policy files are tested with

from ferryman.api.responses import CreateConversationRequest, InputText, MessageItem
from ferryman.auth.policy import AccessPolicy
from ferryman.auth.principal import Principal, acting_as
from ferryman.errors import ConflictError, ForbiddenError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.services.access import Access
from ferryman.services.checked_records import CheckedRecords
from ferryman.services.record_guard import RecordGuard
from ferryman.services.responses.conversations import ConversationService
from ferryman.storage.base import ConversationRecord, SessionRecord, Store
from ferryman.storage.domain.conversations import conversations
from ferryman.storage.kernel.counting import CountingKernel

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


def service(store: Store, policy: AccessPolicy | None = None) -> tuple[ConversationService, CountingKernel]:
    policy = policy or AccessPolicy()
    kernel = CountingKernel(store.kernel)
    access = Access(policy)
    records = CheckedRecords(conversations(kernel), access)
    return ConversationService(store, records, RecordGuard(store, access)), kernel


def message(text: str, item_id: str | None = None) -> MessageItem:
    return MessageItem(id=item_id, role="user", content=[InputText(text=text)])


async def make(conversations_: ConversationService, who: Principal, *texts: str) -> str:
    with acting_as(who):
        request = CreateConversationRequest(items=[message(text) for text in texts], metadata={"by": who.id})
        return (await conversations_.create(request)).id


async def test_each_caller_pages_through_its_own_conversations_in_one_read(store: Store) -> None:
    convs, kernel = service(store)
    made = [await make(convs, ALICE if i % 2 == 0 else BOB) for i in range(6)]
    alices = made[0::2]
    with acting_as(ALICE):
        page = await convs.listing(None, 2, "desc")
        assert ([c.id for c in page.items], page.has_more) == ([alices[2], alices[1]], True)
        kernel.reset()
        rest = await convs.listing(alices[1], 5, "desc")
        assert ([c.id for c in rest.items], rest.has_more) == ([alices[0]], False)
        assert kernel.round_trips == 1  # the cursor is read with the page
        with pytest.raises(NotFoundError):
            await convs.listing(made[1], 5, "asc")  # another's conversation is no cursor
    with acting_as(None):
        assert [c.id for c in (await convs.listing(None, 10, "asc")).items] == made


async def test_another_callers_conversation_and_its_items_look_missing(store: Store) -> None:
    convs, _ = service(store)
    conversation = await make(convs, ALICE, "hello")
    with acting_as(ALICE):
        (item,) = (await convs.list_items(conversation, None, 10, "asc")).items
    assert item.id is not None
    with acting_as(CAROL):
        calls = [
            convs.get(conversation),
            convs.update(conversation, {"mine": "yes"}),
            convs.list_items(conversation, None, 10, "asc"),
            convs.get_item(conversation, item.id),
            convs.add_items(conversation, [message("carol's")]),
            convs.delete_item(conversation, item.id),
            convs.fork(conversation, item.id, None),
            convs.delete(conversation),
        ]
        for call in calls:
            with pytest.raises(NotFoundError):
                await call
    with acting_as(ALICE):
        assert (await convs.get(conversation)).metadata == {"by": "alice"}
        assert [i.id for i in (await convs.list_items(conversation, None, 10, "asc")).items] == [item.id]


async def test_a_team_reads_a_conversation_its_owner_alone_changes(store: Store) -> None:
    convs, _ = service(store, TEAM_READS)
    conversation = await make(convs, ALICE, "hello")
    with acting_as(BOB):
        assert (await convs.get(conversation)).id == conversation
        assert [c.id for c in (await convs.listing(None, 10, "asc")).items] == [conversation]
        assert len((await convs.list_items(conversation, None, 10, "asc")).items) == 1
        with pytest.raises(ForbiddenError):
            await convs.update(conversation, {"bob": "was here"})
        with pytest.raises(ForbiddenError):
            await convs.add_items(conversation, [message("bob's")])
        with pytest.raises(ForbiddenError):
            await convs.delete(conversation)
    with acting_as(CAROL):
        assert (await convs.listing(None, 10, "asc")).items == []
    with acting_as(ALICE):
        assert (await convs.update(conversation, {"new": "1"})).metadata == {"new": "1"}
        assert (await convs.get(conversation)).metadata == {"new": "1"}
        await convs.delete(conversation)
        with pytest.raises(NotFoundError):
            await convs.get(conversation)
    assert await store.all_items(conversation) == []


async def test_a_create_of_a_taken_id_leaves_nothing_of_its_own(store: Store) -> None:
    # A conversation is its record alone: a create of its id must not take it over, nor add its items to it.
    session = SessionRecord(new_id(), None, "conversation", utcnow())
    await store.create_session(session)
    taken = ConversationRecord("conv_taken", session.session_id, {}, 100)
    await store.create_conversation(taken, [])
    with pytest.raises(ConflictError):
        await store.create_conversation(taken, [message("late", new_id("msg"))], Access(AccessPolicy()).owner(BOB))
    kept = await conversations(store.kernel).find("conv_taken")
    assert kept is not None and kept.rec.owner is None
    assert await store.all_items("conv_taken") == []
    await store.delete_conversation("conv_taken")
    assert await conversations(store.kernel).find("conv_taken") is None
    with pytest.raises(NotFoundError):
        await store.delete_conversation("conv_taken")


async def test_a_conversation_of_no_session_is_missing_its_session(store: Store) -> None:
    with pytest.raises(NotFoundError, match="session 'sess_gone' not found"):
        await store.create_conversation(ConversationRecord("conv_x", "sess_gone", {}, 100), [])
    assert await conversations(store.kernel).find("conv_x") is None


async def test_an_update_is_checked_on_the_record_it_writes(store: Store) -> None:
    convs, _ = service(store)
    conversation = await make(convs, ALICE)
    records = conversations(store.kernel)
    checked = convs._records  # noqa: SLF001  (the service's own reads, made to race)
    read = checked.records.find

    async def then_made_again(record_id: str, **query: Any) -> Any:
        found = await read(record_id, **query)
        # Between the update's read and its write, the conversation is deleted and Bob makes one under its id.
        gone = await records.get(conversation)
        await store.delete_conversation(conversation)
        await store.create_conversation(gone, [], Access(AccessPolicy()).owner(BOB))
        return found

    checked.records.find = then_made_again  # type: ignore[method-assign]
    with acting_as(ALICE), pytest.raises(NotFoundError):
        await convs.update(conversation, {"alice's": "now"})
    assert (await records.get(conversation)).metadata == {"by": "alice"}
