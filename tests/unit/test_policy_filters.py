"""The access policy compiled to a storage filter decides every record as the policy itself does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.auth.filters import compile_filter, owner_of
from ferryman.auth.policy import ACTIONS, AccessPolicy, Action, Rule, Scope, parse_policy
from ferryman.auth.principal import ATTRIBUTE_KINDS, Principal, PrincipalKind
from ferryman.errors import ConfigurationError
from ferryman.storage.kernel.filters import ALL, NOTHING, And, IdIn, Not, Or, Terms, admits
from ferryman.storage.kernel.model import owner_terms

ALICE = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red", "green"), "roles": ("user",)})
BOB = Principal(PrincipalKind.SUBJECT, "bob", {"teams": ("red",)})
ADMIN = Principal(PrincipalKind.API_KEY, "ops", {"roles": ("admin",)})

# Small pools, so that generated rules, callers and records often name the same things.
NAMES = ("alice", "bob", "key:alice", "sub:bob")
VALUES = ("red", "blue", "admin")
TYPES = ("agent", "session", "model")
IDS = ("a1", "a2", "m:1", "*")

principals = st.builds(
    Principal,
    kind=st.sampled_from(PrincipalKind),
    id=st.sampled_from(NAMES),
    attributes=st.dictionaries(
        st.sampled_from((*ATTRIBUTE_KINDS, "groups")),
        st.lists(st.sampled_from(VALUES), max_size=2, unique=True).map(tuple),
        max_size=3,
    ),
)
categories = st.sampled_from(ATTRIBUTE_KINDS)
conditions = st.one_of(
    st.sampled_from(["user is owner", "user is not owner", " user  is   owner "]),
    st.builds("user {} owners {}".format, st.sampled_from(["in", "not in"]), categories),
    st.builds("user with {} {} {}".format, st.sampled_from(VALUES), st.sampled_from(["in", "not in"]), categories),
)
scopes = st.fixed_dictionaries(
    {"actions": st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=4, unique=True)},
    optional={
        "principal": st.one_of(
            st.builds("key:{}".format, st.sampled_from(NAMES)),
            st.builds("sub:{}".format, st.sampled_from(NAMES)),
            st.sampled_from(NAMES),
        ),
        "resource": st.builds("{}::{}".format, st.sampled_from(TYPES), st.sampled_from((*IDS, "*"))),
    },
)
condition_lists = st.one_of(conditions, st.lists(conditions, max_size=3))
users = st.tuples(st.integers(0, 9), principals).map(lambda drawn: None if drawn[0] == 0 else drawn[1])


@st.composite
def rules(draw: st.DrawFn) -> dict[str, Any]:
    rule: dict[str, Any] = {draw(st.sampled_from(["permit", "forbid"])): draw(scopes)}
    guard = draw(st.sampled_from([None, "when", "unless"]))
    if guard is not None:
        rule[guard] = draw(condition_lists)
    return rule


policies = st.lists(rules(), max_size=6).map(parse_policy)
records = st.lists(st.tuples(st.one_of(st.none(), principals), st.sampled_from(IDS)), min_size=1, max_size=8)


@settings(max_examples=2500, database=None, deadline=None)
@given(
    policy=policies,
    user=users,
    action=st.sampled_from(ACTIONS),
    resource_type=st.sampled_from(TYPES),
    records=records,
)
def test_the_filter_admits_exactly_the_records_the_policy_allows(
    policy: AccessPolicy,
    user: Principal | None,
    action: Action,
    resource_type: str,
    records: list[tuple[Principal | None, str]],
) -> None:
    flt = compile_filter(policy.rules, user, action, resource_type)
    for owner, record_id in records:
        expected = policy.allows(user, action, f"{resource_type}::{record_id}", owner)
        assert admits(flt, owner_terms(owner_of(owner)), record_id) is expected, (owner, record_id, flt)


def test_the_default_policy_is_the_callers_own_term() -> None:
    policy = AccessPolicy()
    assert compile_filter(policy.rules, ALICE, "delete", "agent") == Terms(frozenset({"p:sub:alice"}))
    assert compile_filter(policy.rules, ADMIN, "read", "model") == Terms(frozenset({"p:key:ops"}))


def test_an_owner_is_keyed_by_its_kind_and_id_and_carries_its_attributes() -> None:
    owner = owner_of(ALICE)
    assert owner is not None and owner.key == "sub:alice"
    assert owner.terms() == {"p:sub:alice", "teams:red", "teams:green", "roles:user"}
    assert owner_of(Principal(PrincipalKind.API_KEY, "alice")).key == "key:alice"  # type: ignore[union-attr]
    assert owner_of(None) is None


def test_team_grants_add_the_callers_teams_to_its_own_term() -> None:
    policy = parse_policy(
        [
            {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
            {"permit": {"actions": ["read"]}, "when": "user in owners teams"},
        ]
    )
    assert compile_filter(policy.rules, ALICE, "read", "agent") == Terms(
        frozenset({"p:sub:alice", "teams:red", "teams:green"})
    )
    assert compile_filter(policy.rules, ALICE, "update", "agent") == Terms(frozenset({"p:sub:alice"}))
    # A caller in no team shares none: only its own records.
    assert compile_filter(policy.rules, ADMIN, "read", "agent") == Terms(frozenset({"p:key:ops"}))


def test_a_forbid_before_a_permit_excludes_what_it_names() -> None:
    policy = parse_policy(
        [
            {"forbid": {"actions": ["delete"], "resource": "agent::*"}, "unless": "user with admin in roles"},
            {"forbid": {"actions": ["read"], "resource": "session::s9"}},
            {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
        ]
    )
    mine = Terms(frozenset({"p:sub:alice"}))
    assert compile_filter(policy.rules, ALICE, "delete", "agent") == NOTHING
    assert compile_filter(policy.rules, ADMIN, "delete", "agent") == Terms(frozenset({"p:key:ops"}))
    assert compile_filter(policy.rules, ALICE, "delete", "session") == mine
    assert compile_filter(policy.rules, ALICE, "read", "session") == And((Not(IdIn(frozenset({"s9"}))), mine))


def test_unless_negates_its_conditions_together() -> None:
    policy = parse_policy(
        [{"permit": {"actions": ["read"]}, "unless": ["user in owners teams", "user with admin not in roles"]}]
    )
    shared = Terms(frozenset({"teams:red", "teams:green"}))
    assert compile_filter(policy.rules, ALICE, "read", "file") == Not(shared)
    assert compile_filter(policy.rules, ADMIN, "read", "file") == ALL
    assert compile_filter(policy.rules, ALICE, "update", "file") == NOTHING


def test_a_named_record_and_principal_become_an_id_for_that_caller_only() -> None:
    policy = parse_policy(
        [
            {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
            {"permit": {"principal": "bob", "actions": ["read"], "resource": "model::m1"}},
        ]
    )
    bobs = Or((Terms(frozenset({"p:sub:bob"})), IdIn(frozenset({"m1"}))))
    assert compile_filter(policy.rules, BOB, "read", "model") == bobs
    assert compile_filter(policy.rules, BOB, "read", "agent") == Terms(frozenset({"p:sub:bob"}))
    assert compile_filter(policy.rules, ALICE, "read", "model") == Terms(frozenset({"p:sub:alice"}))


def test_the_server_itself_may_do_anything() -> None:
    deny_all = parse_policy([{"forbid": {"actions": list(ACTIONS)}}])
    assert compile_filter(deny_all.rules, None, "delete", "agent") == ALL
    assert compile_filter(deny_all.rules, ALICE, "delete", "agent") == NOTHING


def test_a_wildcard_resource_with_an_id_prefix_is_refused_at_load() -> None:
    for resource in ("agent::team-a::*", "agent:::*"):
        with pytest.raises(ConfigurationError, match="no id prefix"):
            parse_policy([{"permit": {"actions": ["read"], "resource": resource}}])
    # A rule built without validation still cannot turn into a wrong filter.
    unchecked = Rule.model_construct(permit=Scope.model_construct(actions=["read"], resource="agent::t::*"))
    with pytest.raises(ValueError, match="prefix"):
        compile_filter([unchecked], ALICE, "read", "agent")
