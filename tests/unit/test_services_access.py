"""The services' authorization step: missing vs forbidden, the filters lists and batches use, and the audit."""

from __future__ import annotations

import pytest

from audit_capture import audit_of
from ferryman.auth.policy import ACTIONS, AccessPolicy, parse_policy
from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.errors import ForbiddenError, NotFoundError
from ferryman.services.access import Access
from ferryman.storage.kernel.filters import ALL, Terms
from ferryman.storage.kernel.model import Kind, Owner
from ferryman.storage.kernel.ops import Check

ALICE = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red",)})
BOB = Principal(PrincipalKind.SUBJECT, "bob", {"teams": ("red",)})
CAROL = Principal(PrincipalKind.API_KEY, "carol", {"teams": ("blue",), "roles": ("admin",)})
AGENT = Kind("agent")
VECTOR_STORE = Kind("vector_store")

TEAM_READS = parse_policy(
    [
        {"forbid": {"actions": ["create"], "resource": "agent::*"}, "unless": "user with admin in roles"},
        {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
        {"permit": {"actions": ["read"]}, "when": "user in owners teams"},
    ]
)


def test_a_record_the_caller_may_not_read_is_missing_and_audited(caught: pytest.LogCaptureFixture) -> None:
    access = Access(AccessPolicy())
    with pytest.raises(NotFoundError, match="^agent 'a1' not found$"):
        access.check(BOB, "delete", AGENT, "a1", access.owner(ALICE))
    with pytest.raises(NotFoundError, match="^vector store 'vs1' not found$"):
        access.check(BOB, "read", VECTOR_STORE, "vs1", None)
    assert audit_of(caught) == [
        ("denied", "sub:bob", "delete", "agent::a1"),
        ("denied", "sub:bob", "read", "vector_store::vs1"),
    ]


def test_a_readable_record_the_caller_may_not_change_is_forbidden(caught: pytest.LogCaptureFixture) -> None:
    access = Access(TEAM_READS)
    alices = access.owner(ALICE)
    access.check(BOB, "read", AGENT, "a1", alices)
    with pytest.raises(ForbiddenError, match="not allowed to update agent 'a1'"):
        access.check(BOB, "update", AGENT, "a1", alices)
    access.check(ALICE, "delete", AGENT, "a1", alices)
    with pytest.raises(NotFoundError):
        access.check(CAROL, "read", AGENT, "a1", alices)
    assert audit_of(caught) == [
        ("denied", "sub:bob", "update", "agent::a1"),
        ("denied", "key:carol", "read", "agent::a1"),
    ]


def test_a_create_is_checked_for_the_caller_as_its_owner(caught: pytest.LogCaptureFixture) -> None:
    access = Access(TEAM_READS)
    with pytest.raises(ForbiddenError, match="not allowed to create agent 'a9'"):
        access.check(ALICE, "create", "agent", "a9")
    access.check(CAROL, "create", "agent", "a9")
    access.check(ALICE, "create", "session", "s1", owner=access.owner(BOB))  # the owner given is not the creator
    assert audit_of(caught) == [("denied", "sub:alice", "create", "agent::a9")]


def test_the_server_itself_is_never_refused_nor_audited(caught: pytest.LogCaptureFixture) -> None:
    access = Access(parse_policy([{"forbid": {"actions": list(ACTIONS)}}]))
    access.check(None, "delete", AGENT, "a1", access.owner(ALICE))
    assert access.owner(None) is None
    assert access.filter(None, "delete", AGENT) == ALL
    assert access.guard(None, "delete", AGENT, "a1") == Check(AGENT, "a1", ALL, ALL)
    assert audit_of(caught) == []


def test_filters_are_compiled_once_per_caller_action_and_kind() -> None:
    access = Access(TEAM_READS, cache_size=2)
    first = access.filter(ALICE, "read", AGENT)
    assert first == Terms(frozenset({"p:sub:alice", "teams:red"}))
    assert access.filter(ALICE, "read", "agent") is first
    # The same caller with other attributes (a new token's claims) gets its own filter.
    moved = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("blue",)})
    assert access.filter(moved, "read", AGENT) == Terms(frozenset({"p:sub:alice", "teams:blue"}))
    assert access.filter(ALICE, "update", AGENT) == Terms(frozenset({"p:sub:alice"}))
    assert access.filter(ALICE, "read", AGENT) == first  # dropped from the full cache, compiled again
    with pytest.raises(ValueError, match="cache_size"):
        Access(TEAM_READS, cache_size=0)


def test_a_guard_carries_the_read_and_action_filters() -> None:
    access = Access(TEAM_READS)
    guard = access.guard(BOB, "delete", AGENT, "a1", parent="p1")
    assert guard == Check(
        AGENT,
        "a1",
        read=Terms(frozenset({"p:sub:bob", "teams:red"})),
        act=Terms(frozenset({"p:sub:bob"})),
        parent="p1",
    )
    assert access.guard(BOB, "read", AGENT, "a1").act == ALL
    with pytest.raises(ValueError, match="create"):
        access.guard(BOB, "create", AGENT, "a1")


def test_a_batch_refused_by_its_guard_is_audited(caught: pytest.LogCaptureFixture) -> None:
    access = Access(TEAM_READS)
    with pytest.raises(ForbiddenError), access.audited(BOB, "delete", AGENT, "a1"):
        raise ForbiddenError("not allowed to delete agent 'a1'")
    with pytest.raises(NotFoundError), access.audited(BOB, "update", AGENT, "a1"):
        raise NotFoundError("agent 'a1' not found")
    with pytest.raises(NotFoundError), access.audited(BOB, "read", AGENT, "a1"):
        raise NotFoundError("session 's1' not found")  # another operation's record: not this guard's denial
    with access.audited(BOB, "update", AGENT, "a1"):
        pass
    assert audit_of(caught) == [
        ("denied", "sub:bob", "delete", "agent::a1"),
        ("denied", "sub:bob", "update", "agent::a1"),
    ]


def test_a_missing_record_is_no_denial_where_the_caller_may_read_everything(caught: pytest.LogCaptureFixture) -> None:
    access = Access(parse_policy([{"permit": {"actions": list(ACTIONS)}}]))
    with pytest.raises(NotFoundError), access.audited(BOB, "delete", AGENT, "a1"):
        raise NotFoundError("agent 'a1' not found")
    assert audit_of(caught) == []


def test_creations_and_deletions_are_audited_for_the_caller(caught: pytest.LogCaptureFixture) -> None:
    access = Access(AccessPolicy())
    access.record(CAROL, "create", AGENT, "a1")
    access.record(CAROL, "delete", "agent", "a1")
    access.record(None, "delete", AGENT, "a2")
    assert audit_of(caught) == [
        ("create", "key:carol", "create", "agent::a1"),
        ("delete", "key:carol", "delete", "agent::a1"),
    ]
    assert access.owner(CAROL) == Owner("api_key", "carol", {"teams": ("blue",), "roles": ("admin",)})
