"""Registrations and API keys as the versions before the storage kernel stored them, and what they become.

The same values go into the old SQL tables (``test_sql_migrations``) and the old Redis layout
(``test_redis_upgrade``); :func:`assert_moved` reads them back through the kernel after the upgrade.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from ferryman.api.registry import McpEndpoint, Model, ToolGroup
from ferryman.api.safety import ShieldResource
from ferryman.storage.domain import registry
from ferryman.storage.domain.api_keys import ApiKeyRecord, ApiKeys
from ferryman.storage.domain.kinds import API_KEY, MODEL, SHIELD, TOOLGROUP
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import Kind, Owner, Rec
from ferryman.storage.kernel.ops import Page
from ferryman.storage.kernel.protocol import Kernel

WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

ALICE = {"kind": "api_key", "id": "alice", "attributes": {"roles": ["dev"], "teams": ["red"]}}
BOB = {"kind": "subject", "id": "bob", "attributes": {"teams": ["blue"]}}

# In the order they were registered (the old ids), which is not their ids' order.
MODELS = [
    Model(identifier="zeta", provider_id="openai", provider_resource_id="gpt-x", metadata={"k": "v", "n": None}),
    Model(identifier="alpha", provider_id="local", provider_resource_id="e5", model_type="embedding"),
]
TOOLGROUPS = [
    ToolGroup(identifier="tg-mcp", provider_id="model-context-protocol", mcp_endpoint=McpEndpoint(uri="http://m")),
    ToolGroup(identifier="tg-args", args={"depth": 2, "none": None}),
]
SHIELDS = [
    ShieldResource(identifier="sh-red", provider_id="regex", params={"patterns": ["x"]}),
    ShieldResource(identifier="sh-plain", provider_id="llama-guard"),
]
REGISTERED: dict[str, list[Any]] = {"model": MODELS, "toolgroup": TOOLGROUPS, "shield": SHIELDS}
OWNERS = {("model", "zeta"): ALICE, ("toolgroup", "tg-mcp"): BOB, ("shield", "sh-red"): ALICE}
ORPHAN = ("model", "deleted-long-ago")
"""An owner row whose record is gone: the upgrade drops it."""

# name, key_hash, attributes, created_at, revoked_at: "old" (revoked) was made first, though it sorts after "ci".
API_KEYS = [
    ("old", "hash-old", {}, WHEN - timedelta(days=30), WHEN - timedelta(days=1)),
    ("ci", "hash-ci", {"roles": ["admin"], "teams": ["red"]}, WHEN - timedelta(days=2), None),
]


def registered_at(kind: str, index: int) -> datetime:
    """When the ``index``-th registration of ``kind`` was made (a minute apart, in order)."""
    return WHEN + timedelta(minutes=index)


def principal(owner: dict[str, Any]) -> str:
    """The ``principal`` column of the old ``record_owners`` (the qualified name)."""
    return {"api_key": "key:", "subject": "sub:"}[owner["kind"]] + owner["id"]


def _owner(kind: str, record_id: str) -> Owner | None:
    found = OWNERS.get((kind, record_id))
    return None if found is None else Owner.from_json(found)


async def _page(kernel: Kernel, kind: Kind, **options: Any) -> list[Rec]:
    [page] = await kernel.read([Page(kind, **options)])
    return list(page.items)


def _ids(records: list[Rec]) -> list[str]:
    return [rec.id for rec in records]


async def assert_moved(kernel: Kernel, with_times: bool = True) -> None:
    """Every registration and API key is a record now: in order, with its owner, terms and body.

    Args:
        kernel: The upgraded backend's kernel.
        with_times: Whether the old layout kept registration times (Redis did not: the records are
            created when the upgrade runs).
    """
    seqs: list[int] = []
    for kind, values in ((MODEL, MODELS), (TOOLGROUP, TOOLGROUPS), (SHIELD, SHIELDS)):
        records = await _page(kernel, kind)
        assert _ids(records) == [value.identifier for value in values], kind.name
        for index, (rec, value) in enumerate(zip(records, values, strict=True)):
            assert rec.body == value.model_dump(mode="json", exclude_none=True), rec.id
            assert type(value).model_validate(rec.body) == value
            assert rec.owner == _owner(kind.name, rec.id), rec.id
            assert (rec.parent, rec.status, rec.lease_until) == ("", None, None)
            if with_times:
                assert rec.at == registered_at(kind.name, index).timestamp(), rec.id
        seqs.extend(rec.seq for rec in records)
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # The owners' terms answer filtered pages: a team's, a principal's, the unowned.
    assert _ids(await _page(kernel, MODEL, allow=Terms(frozenset({"teams:red"})))) == ["zeta"]
    assert _ids(await _page(kernel, SHIELD, allow=Terms(frozenset({"teams:red"})))) == ["sh-red"]
    assert _ids(await _page(kernel, TOOLGROUP, allow=Terms(frozenset({"teams:red"})))) == []
    assert _ids(await _page(kernel, TOOLGROUP, allow=Terms(frozenset({"p:sub:bob"})))) == ["tg-mcp"]
    assert _ids(await _page(kernel, SHIELD, allow=Terms(frozenset({"roles:dev"})))) == ["sh-red"]
    assert _ids(await _page(kernel, MODEL, allow=Terms(frozenset({"-"})))) == ["alpha"]
    keys = await _page(kernel, API_KEY)
    assert _ids(keys) == [name for name, *_ in API_KEYS]
    for rec, (name, key_hash, attributes, created_at, revoked_at) in zip(keys, API_KEYS, strict=True):
        expected = {
            "name": name,
            "key_hash": key_hash,
            "attributes": attributes,
            "created_at": created_at.timestamp(),
            "revoked_at": None if revoked_at is None else revoked_at.timestamp(),
        }
        assert (rec.body, rec.owner, rec.at) == (expected, None, created_at.timestamp())
    assert _ids(await _page(kernel, API_KEY, allow=Terms(frozenset({"-"})))) == ["old", "ci"]
    assert _ids(await _page(kernel, API_KEY, where=("key_hash", "hash-ci"))) == ["ci"]
    await _assert_domain_stores(kernel)


async def _assert_domain_stores(kernel: Kernel) -> None:
    """What the stores above the kernel read: the same values the old stores returned."""
    assert await registry.models(kernel).all() == MODELS
    assert await registry.toolgroups(kernel).all() == TOOLGROUPS
    assert await registry.shields(kernel).all() == SHIELDS
    assert await registry.toolgroups(kernel).get("tg-args") == TOOLGROUPS[1]
    keys = ApiKeys(kernel)
    for name, key_hash, attributes, created_at, revoked_at in API_KEYS:
        granted = {kind: tuple(values) for kind, values in attributes.items()}
        assert await keys.by_hash(key_hash) == ApiKeyRecord(name, key_hash, granted, created_at, revoked_at)
    assert [key.name for key in await keys.list()] == ["ci", "old"]


def same_registration(stored: str, value: BaseModel) -> bool:
    """Whether a registration's JSON as the old tables hold it reads back as ``value``."""
    return type(value).model_validate_json(stored) == value
