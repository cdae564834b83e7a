"""The access policy: Llama Stack's rules, parsed at start-up and evaluated in order, deny by default."""

from __future__ import annotations

import pytest

from ferryman.auth.policy import AccessPolicy, parse_policy
from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.errors import ConfigurationError

ALICE = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red",), "roles": ("user",)})
BOB = Principal(PrincipalKind.SUBJECT, "bob", {"teams": ("red",)})
CAROL = Principal(PrincipalKind.SUBJECT, "carol", {"teams": ("blue",), "roles": ("admin",)})


def test_the_default_lets_each_caller_act_only_on_what_it_owns() -> None:
    policy = AccessPolicy()
    assert policy.allows(ALICE, "delete", "agent::1", ALICE)
    assert not policy.allows(BOB, "read", "agent::1", ALICE)
    assert not policy.allows(BOB, "read", "agent::1", None)
    assert policy.allows(None, "delete", "agent::1", ALICE)  # the server itself


def test_rules_are_read_in_order_and_deny_by_default() -> None:
    policy = parse_policy(
        [
            {"forbid": {"actions": ["delete"], "resource": "agent::*"}, "unless": "user with admin in roles"},
            {"permit": {"actions": ["read", "delete"]}, "when": "user in owners teams"},
            {"permit": {"principal": "carol", "actions": ["read"], "resource": "model::m1"}},
        ]
    )
    assert policy.allows(BOB, "read", "agent::1", ALICE)
    assert not policy.allows(BOB, "delete", "agent::1", ALICE)
    assert policy.allows(BOB, "delete", "session::1", ALICE)
    assert not policy.allows(CAROL, "read", "agent::1", ALICE)
    assert policy.allows(CAROL, "read", "model::m1", ALICE)
    assert not policy.allows(CAROL, "read", "model::m2", ALICE)
    assert not policy.allows(BOB, "update", "agent::1", ALICE)


def test_negated_conditions() -> None:
    policy = parse_policy(
        [
            {"forbid": {"actions": ["read"]}, "when": ["user is not owner", "user not in owners teams"]},
            {"permit": {"actions": ["read"]}, "when": "user with admin not in roles"},
        ]
    )
    assert policy.allows(BOB, "read", "x::1", ALICE)
    assert not policy.allows(CAROL, "read", "x::1", ALICE)


@pytest.mark.parametrize(
    "rule",
    [
        {"permit": {"actions": ["fly"]}},
        {"permit": {"actions": ["read"]}, "when": "user is the boss"},
        {"permit": {"actions": ["read"], "resource": "agents"}},
        {"permit": {"actions": ["read"]}, "forbid": {"actions": ["read"]}},
        {"allow": {"actions": ["read"]}},
    ],
)
def test_a_bad_rule_is_a_configuration_error(rule: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="access_policy rule 0"):
        parse_policy([rule])


KEY_ALICE = Principal(PrincipalKind.API_KEY, "alice", {"teams": ("red",)})
SUBJECT_KEY_ALICE = Principal(PrincipalKind.SUBJECT, "key:alice", {"teams": ("red",)})


def test_owners_are_told_apart_by_kind_as_well_as_id() -> None:
    policy = AccessPolicy()
    for caller, owner in [(SUBJECT_KEY_ALICE, KEY_ALICE), (KEY_ALICE, SUBJECT_KEY_ALICE), (ALICE, KEY_ALICE)]:
        assert not policy.allows(caller, "read", "file::1", owner)
    # The same caller, whose attributes changed since it created the record, still owns it.
    assert policy.allows(KEY_ALICE, "read", "file::1", Principal(PrincipalKind.API_KEY, "alice"))
    assert KEY_ALICE.qualified == "key:alice" and SUBJECT_KEY_ALICE.qualified == "sub:key:alice"


def test_a_rule_names_an_api_key_or_a_subject_and_never_the_other() -> None:
    def readers(principal: str) -> set[str]:
        policy = parse_policy([{"permit": {"principal": principal, "actions": ["read"]}}])
        callers = {"key": KEY_ALICE, "sub:key": SUBJECT_KEY_ALICE, "sub": ALICE}
        return {name for name, caller in callers.items() if policy.allows(caller, "read", "agent::1", BOB)}

    assert readers("key:alice") == {"key"}
    assert readers("sub:key:alice") == {"sub:key"}
    assert readers("alice") == readers("sub:alice") == {"sub"}


def test_a_principal_kind_is_checked_when_it_is_made() -> None:
    with pytest.raises(ValueError, match="alice"):
        Principal("alice", "x")  # type: ignore[arg-type]  # the id where the kind goes
