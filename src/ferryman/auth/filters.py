"""The access policy as a storage filter: which records one caller may act on, answered by an index.

:meth:`AccessPolicy.allows <ferryman.auth.policy.AccessPolicy.allows>` decides
one record at a time. A list cannot read every record to ask it, so
:func:`compile_filter` folds the policy, for one caller, action and kind of
record, into a :mod:`~ferryman.storage.kernel.filters` value over what storage
indexes: the owner terms of each record and its id.

Everything a rule says about the caller alone is a constant once the caller is
known: its scope's principal and actions, ``user with X in roles``, and a
``type::*`` resource. What is left is about the record: ``user is owner`` is the
term of the caller as an owner (``p:<kind>:<id>``), ``user in owners teams``
the terms of the caller's teams, ``type::id`` the record's id, and the ``not``
forms their complements. Rules are read in order and the first that applies
decides, deny by default, so reading them from the last one back::

    decided = Nothing
    permit rule A:  decided = A or decided
    forbid rule A:  decided = (not A) and decided

which is the first-match list ``Or_i(permit_i and A_i and not A_j for j < i)``
in a size linear in the rules. The default policy (act only on what you own)
becomes ``Terms({"p:<kind>:<id>"})``: one lookup in the terms index.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ferryman.storage.kernel.filters import ALL, NOTHING, Filter, IdIn, Terms, all_of, any_of, negate
from ferryman.storage.kernel.model import Owner, attribute_term, principal_term

from .policy import Action, Rule, Scope
from .principal import ATTRIBUTE_KINDS, Principal, parse_principal

_CATEGORIES = "|".join(ATTRIBUTE_KINDS)
_IS_OWNER = re.compile(r"user is( not)? owner")
_SHARES = re.compile(rf"user (in|not in) owners ({_CATEGORIES})")
_HAS = re.compile(rf"user with (\S+) (in|not in) ({_CATEGORIES})")


def owner_of(principal: Principal | None) -> Owner | None:
    """The owner a record made by ``principal`` stores (None: made by the server itself).

    The one conversion of a caller into an owner: its key is ``key:NAME`` or ``sub:ID`` (the principal's
    qualified name, as stored), so a key and a subject of the same name are two owners.
    """
    if principal is None:
        return None
    attributes = {category: tuple(values) for category, values in principal.attributes.items()}
    return Owner(kind=principal.kind.value, id=principal.id, attributes=attributes)


def compile_filter(rules: Sequence[Rule], user: Principal | None, action: Action, resource_type: str) -> Filter:
    """The records of ``resource_type`` on which the policy lets ``user`` do ``action``.

    For every record, ``admits(filter, owner_terms(owner_of(record_owner)), record_id)`` equals
    ``AccessPolicy(rules).allows(user, action, f"{resource_type}::{record_id}", record_owner)``.

    Args:
        rules: The policy's rules in force, in order (:attr:`AccessPolicy.rules
            <ferryman.auth.policy.AccessPolicy.rules>`, the default rule included).
        user: The caller; None is the server itself, which may do anything.
        action: What it asks to do.
        resource_type: The kind of record as the policy names it (``agent``, ``vector_store``).

    Raises:
        ValueError: a rule the policy's validation refuses (an unknown condition, an id-prefix wildcard).
    """
    if user is None:
        return ALL
    decided: Filter = NOTHING
    for rule in reversed(rules):
        applies = _applies(rule, user, action, resource_type)
        if rule.permit is not None:
            decided = any_of((applies, decided))
        else:
            decided = all_of((negate(applies), decided))
    return decided


def _applies(rule: Rule, user: Principal, action: Action, resource_type: str) -> Filter:
    """The records to which ``rule`` applies for this caller and action: its scope and its conditions."""
    scope = rule.permit if rule.permit is not None else rule.forbid
    assert scope is not None  # a rule has one of them, by validation
    covered = _covers(scope, user, action, resource_type)
    if covered == NOTHING:
        return NOTHING
    negated = rule.unless is not None
    texts = rule.unless if negated else rule.when
    listed = [texts] if isinstance(texts, str) else list(texts or [])
    holds = all_of(_condition(text, user) for text in listed)
    return all_of((covered, negate(holds) if negated else holds))


def _covers(scope: Scope, user: Principal, action: Action, resource_type: str) -> Filter:
    """The records a scope names for this caller and action (see :meth:`Scope.covers`)."""
    if scope.principal is not None and parse_principal(scope.principal) != (user.kind, user.id):
        return NOTHING
    if action not in scope.actions:
        return NOTHING
    resource = scope.resource
    if resource is None:
        return ALL
    qualified = f"{resource_type}::"
    if resource.endswith("::*"):
        prefix = resource[:-1]
        if len(prefix) <= len(qualified):
            return ALL if qualified.startswith(prefix) else NOTHING
        if prefix.startswith(qualified):
            raise ValueError(f"resource {resource!r} matches ids by prefix, which no filter expresses")
        return NOTHING
    if resource.startswith(qualified):
        return IdIn(frozenset({resource[len(qualified) :]}))
    return NOTHING


def _condition(text: str, user: Principal) -> Filter:
    """The records for which one condition holds, for this caller."""
    normalized = " ".join(text.split())
    if found := _IS_OWNER.fullmatch(normalized):
        owner = owner_of(user)
        assert owner is not None
        is_owner = Terms(frozenset({principal_term(owner.key)}))
        return negate(is_owner) if found.group(1) else is_owner
    if found := _SHARES.fullmatch(normalized):
        values = user.values(found.group(2))
        shared = Terms(frozenset(attribute_term(found.group(2), v) for v in values)) if values else NOTHING
        return shared if found.group(1) == "in" else negate(shared)
    if found := _HAS.fullmatch(normalized):
        has = found.group(1) in user.values(found.group(3))
        return ALL if has is (found.group(2) == "in") else NOTHING
    raise ValueError(f"unknown condition {text!r}")
