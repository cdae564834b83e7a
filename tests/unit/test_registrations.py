"""Registrations (models, toolgroups, shields) as each caller sees them: owners, replacement, and the audit."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from audit_capture import audit_of
from ferryman.api.registry import Model
from ferryman.auth.policy import ACTIONS, AccessPolicy, parse_policy
from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.errors import ConflictError, ForbiddenError, NotFoundError
from ferryman.services.access import Access
from ferryman.services.registrations import Registrations
from ferryman.storage.domain import registry
from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.domain.records import Records
from ferryman.storage.kernel.memory import MemoryKernel
from ferryman.storage.kernel.ops import ReadOp

pytestmark = pytest.mark.anyio

ALICE = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red",)})
BOB = Principal(PrincipalKind.API_KEY, "bob", {"teams": ("red",)})


def model(identifier: str, resource: str = "upstream") -> Model:
    return Model(identifier=identifier, provider_id="remote", provider_resource_id=resource)


@pytest.fixture()
async def records() -> AsyncIterator[Records[Model]]:
    kernel = MemoryKernel(SCHEMA)
    await kernel.open()
    try:
        yield registry.models(kernel)
    finally:
        await kernel.close()


async def test_a_create_stores_its_caller_as_owner_and_a_taken_id_conflicts(records: Records[Model]) -> None:
    models = Registrations(records, Access(AccessPolicy()))
    await models.create(ALICE, model("m"))
    found = await records.find("m")
    assert found is not None and found.rec.owner == Access(AccessPolicy()).owner(ALICE)
    with pytest.raises(ConflictError, match="^model 'm' already exists$"):
        await models.create(BOB, model("m", "other"))
    assert await models.get(ALICE, "m") == model("m")


async def test_another_callers_registration_is_missing_to_a_caller_and_the_denial_audited(
    records: Records[Model], caught: pytest.LogCaptureFixture
) -> None:
    models = Registrations(records, Access(AccessPolicy()))
    await models.create(ALICE, model("m"))
    caught.clear()
    assert await models.find(BOB, "m") is None
    with pytest.raises(NotFoundError, match="^model 'm' not found$"):
        await models.delete(BOB, "m")
    assert audit_of(caught) == [("denied", "key:bob", "read", "model::m"), ("denied", "key:bob", "delete", "model::m")]
    assert await models.list(BOB) == [] and await models.list(ALICE) == [model("m")]
    assert await models.list(None) == [model("m")]


async def test_saving_again_replaces_for_its_owner_and_conflicts_for_another(records: Records[Model]) -> None:
    models = Registrations(records, Access(AccessPolicy()))
    await models.save(ALICE, model("first"))
    await models.save(ALICE, model("second"))
    await models.save(ALICE, model("first", "moved"))
    assert await models.list(ALICE) == [model("first", "moved"), model("second")]
    with pytest.raises(ConflictError, match="^model 'first' already exists$"):
        await models.save(BOB, model("first", "hijacked"))
    assert await models.get(ALICE, "first") == model("first", "moved")


async def test_a_caller_the_policy_lets_update_replaces_anothers_registration_which_keeps_its_owner(
    records: Records[Model],
) -> None:
    teams = parse_policy([{"permit": {"actions": list(ACTIONS)}, "when": "user in owners teams"}])
    models = Registrations(records, Access(teams))
    await models.save(ALICE, model("m"))
    await models.save(BOB, model("m", "moved"))
    found = await records.find("m")
    assert found is not None and found.value == model("m", "moved") and found.rec.owner is not None
    assert found.rec.owner.id == "alice"


async def test_an_unowned_registration_goes_to_the_first_caller_that_registers_it_again(
    records: Records[Model],
) -> None:
    models = Registrations(records, Access(AccessPolicy()))
    await models.save(None, model("m"))
    assert await models.list(ALICE) == []
    await models.save(ALICE, model("m", "mine"))
    assert await models.list(ALICE) == [model("m", "mine")]
    with pytest.raises(ConflictError):
        await models.save(BOB, model("m", "theirs"))


async def test_the_server_itself_replaces_and_deletes_anything_without_taking_it(records: Records[Model]) -> None:
    models = Registrations(records, Access(AccessPolicy()))
    await models.save(ALICE, model("m"))
    await models.save(None, model("m", "by the server"))
    assert await models.list(ALICE) == [model("m", "by the server")]
    assert await models.delete(None, "m") is True
    assert await models.delete(None, "m") is False


async def test_creates_deletes_and_refused_creates_are_audited(
    records: Records[Model], caught: pytest.LogCaptureFixture
) -> None:
    nobody_creates = parse_policy([{"permit": {"actions": ["read", "update", "delete"]}, "when": "user is owner"}])
    models = Registrations(records, Access(AccessPolicy()))
    await models.create(ALICE, model("m"))
    assert await models.delete(ALICE, "m") is True
    with pytest.raises(ForbiddenError, match="^not allowed to create model 'n'$"):
        await Registrations(records, Access(nobody_creates)).save(BOB, model("n"))
    assert await records.all() == []
    assert audit_of(caught) == [
        ("create", "sub:alice", "create", "model::m"),
        ("delete", "sub:alice", "delete", "model::m"),
        ("denied", "key:bob", "create", "model::n"),
    ]


class Interleaved(MemoryKernel):
    """A memory kernel that lets another caller act once, right after the next read answers."""

    between: Callable[[], Awaitable[None]] | None = None

    async def read(self, ops: Sequence[ReadOp]) -> list[Any]:
        found = await super().read(ops)
        step, self.between = self.between, None
        if step is not None:
            await step()
        return found


@pytest.fixture()
async def interleaved() -> AsyncIterator[tuple[Interleaved, Records[Model]]]:
    kernel = Interleaved(SCHEMA)
    await kernel.open()
    try:
        yield kernel, registry.models(kernel)
    finally:
        await kernel.close()


async def test_two_callers_claiming_one_unowned_registration_at_once_leave_it_to_the_first(
    interleaved: tuple[Interleaved, Records[Model]],
) -> None:
    kernel, records = interleaved
    models = Registrations(records, Access(AccessPolicy()))
    await models.save(None, model("m"))

    async def alice_claims_it_first() -> None:
        await models.save(ALICE, model("m", "alice's"))

    kernel.between = alice_claims_it_first  # after Bob read it unowned, before Bob's write
    with pytest.raises(ConflictError, match="^model 'm' already exists$"):
        await models.save(BOB, model("m", "bob's"))
    assert await models.list(ALICE) == [model("m", "alice's")]


async def test_a_save_does_not_replace_a_registration_another_caller_made_after_it_read_its_own(
    interleaved: tuple[Interleaved, Records[Model]],
) -> None:
    kernel, records = interleaved
    models = Registrations(records, Access(AccessPolicy()))
    await models.save(ALICE, model("m"))

    async def deleted_and_taken_by_bob() -> None:
        await models.delete(ALICE, "m")
        await models.create(BOB, model("m", "bob's"))

    kernel.between = deleted_and_taken_by_bob  # after Alice read her own, before her replacing write
    with pytest.raises(ConflictError, match="^model 'm' already exists$"):
        await models.save(ALICE, model("m", "alice's again"))
    assert await models.list(BOB) == [model("m", "bob's")]
