"""Who may do what: Llama Stack's ``access_policy`` rules, parsed once and evaluated per access.

A rule permits or forbids a scope (``principal``, ``actions``, ``resource`` as
``type::id`` or ``type::*``), optionally only ``when`` conditions hold or
``unless`` they do. Rules are read in order; the first whose scope and
conditions match decides; nothing matching denies. With no rules, the default
is that a caller sees and acts only on what it owns.

Conditions (each a string; a list must hold all of them)::

    user is owner                     user is not owner
    user in owners roles              user not in owners teams      (roles/teams/projects/namespaces)
    user with admin in roles          user with admin not in roles

Principals are typed: ``user is owner`` compares kind and id, and a scope's
``principal`` is ``key:NAME`` (an API key), ``sub:ID`` or a bare ``ID`` (a
token's subject), so no token's ``sub`` reaches what a key owns or is granted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ferryman.errors import ConfigurationError

from .principal import ATTRIBUTE_KINDS, Principal, parse_principal

Action = Literal["create", "read", "update", "delete"]
ACTIONS: tuple[Action, ...] = ("create", "read", "update", "delete")

Condition = Callable[[Principal, Principal | None], bool]
"""Whether a condition holds for a caller and a resource's owner (None: unowned)."""

_KINDS = "|".join(ATTRIBUTE_KINDS)
_CONDITIONS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], Condition]], ...] = (
    (re.compile(r"user is owner"), lambda m: lambda user, owner: user.same_as(owner)),
    (re.compile(r"user is not owner"), lambda m: lambda user, owner: not user.same_as(owner)),
    (re.compile(rf"user in owners ({_KINDS})"), lambda m: _shares(m.group(1), True)),
    (re.compile(rf"user not in owners ({_KINDS})"), lambda m: _shares(m.group(1), False)),
    (re.compile(rf"user with (\S+) in ({_KINDS})"), lambda m: _has(m.group(1), m.group(2), True)),
    (re.compile(rf"user with (\S+) not in ({_KINDS})"), lambda m: _has(m.group(1), m.group(2), False)),
)


def _shares(kind: str, expected: bool) -> Condition:
    """The caller shares at least one value of ``kind`` with the owner (an unowned record shares none)."""

    def holds(user: Principal, owner: Principal | None) -> bool:
        shared = owner is not None and bool(set(user.values(kind)) & set(owner.values(kind)))
        return shared is expected

    return holds


def _has(value: str, kind: str, expected: bool) -> Condition:
    return lambda user, owner: (value in user.values(kind)) is expected


def parse_condition(text: str) -> Condition:
    """A condition from its text.

    Raises:
        ValueError: the text is none of the known conditions.
    """
    normalized = " ".join(text.split())
    for pattern, build in _CONDITIONS:
        found = pattern.fullmatch(normalized)
        if found:
            return build(found)
    raise ValueError(f"unknown condition {text!r}")


class Scope(BaseModel):
    """What a rule is about: whose calls, which actions, which resources.

    ``principal`` is ``key:NAME`` for an API key, ``sub:ID`` or a bare ``ID`` for an
    identity provider's subject (see :func:`~ferryman.auth.principal.parse_principal`).
    """

    model_config = ConfigDict(extra="forbid")

    principal: str | None = None
    actions: list[Action] = Field(min_length=1)
    resource: str | None = None

    @field_validator("actions", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("resource")
    @classmethod
    def _qualified(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[^:\s]+::\S+", value):
            raise ValueError(f"resource must be 'type::id' or 'type::*', not {value!r}")
        if value is not None and value.endswith("::*") and value != value.split("::", 1)[0] + "::*":
            # 'agent::team-a::*' would match ids by prefix, which no storage index answers (auth.filters).
            raise ValueError(f"a wildcard resource is 'type::*' (no id prefix), not {value!r}")
        return value

    def covers(self, user: Principal, action: Action, resource: str) -> bool:
        """Whether the scope names this caller (its kind and id), action and ``type::id`` resource."""
        if self.principal is not None and parse_principal(self.principal) != (user.kind, user.id):
            return False
        if action not in self.actions:
            return False
        if self.resource is None or self.resource == resource:
            return True
        return self.resource.endswith("::*") and resource.startswith(self.resource[:-1])


class Rule(BaseModel):
    """One ``access_policy`` entry."""

    model_config = ConfigDict(extra="forbid")

    permit: Scope | None = None
    forbid: Scope | None = None
    when: str | list[str] | None = None
    unless: str | list[str] | None = None
    description: str | None = None

    @model_validator(mode="after")
    def _one_effect(self) -> Rule:
        if (self.permit is None) == (self.forbid is None):
            raise ValueError("a rule has exactly one of 'permit' and 'forbid'")
        if self.when is not None and self.unless is not None:
            raise ValueError("a rule has at most one of 'when' and 'unless'")
        for text in _listed(self.when) + _listed(self.unless):
            parse_condition(text)
        return self


def _listed(value: str | list[str] | None) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


@dataclass(frozen=True)
class _Compiled:
    permit: bool
    scope: Scope
    conditions: tuple[Condition, ...]
    negate: bool

    def applies(self, user: Principal, action: Action, resource: str, owner: Principal | None) -> bool:
        if not self.scope.covers(user, action, resource):
            return False
        holds = all(condition(user, owner) for condition in self.conditions)
        return not holds if self.negate else holds


class AccessPolicy:
    """Ordered rules, deny by default; no rules: each caller acts only on what it owns.

    Args:
        rules: The parsed rules (see :func:`parse_policy`).
    """

    def __init__(self, rules: Sequence[Rule] = ()) -> None:
        rules = list(rules) or [Rule(permit=Scope(actions=list(ACTIONS)), when="user is owner")]
        self._parsed = tuple(rules)
        self._rules = [
            _Compiled(
                rule.permit is not None,
                rule.permit or rule.forbid,  # type: ignore[arg-type]  # one of them, by validation
                tuple(parse_condition(text) for text in _listed(rule.unless if rule.unless is not None else rule.when)),
                rule.unless is not None,
            )
            for rule in rules
        ]

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules in force, in order (the default rule when none were given); see :mod:`ferryman.auth.filters`."""
        return self._parsed

    def allows(self, user: Principal | None, action: Action, resource: str, owner: Principal | None) -> bool:
        """Whether ``user`` may do ``action`` on ``resource`` (``type::id``) owned by ``owner``.

        No user is the server itself (or a server without authentication): always allowed.
        """
        if user is None:
            return True
        for rule in self._rules:
            if rule.applies(user, action, resource, owner):
                return rule.permit
        return False


def parse_policy(raw: Sequence[dict[str, Any]]) -> AccessPolicy:
    """The policy of ``server.auth.access_policy``.

    Raises:
        ConfigurationError: a rule is malformed (unknown key, action or condition).
    """
    rules = []
    for index, entry in enumerate(raw):
        try:
            rules.append(Rule.model_validate(entry))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'rule'}: {e['msg']}" for e in exc.errors())
            raise ConfigurationError(f"access_policy rule {index}: {problems}") from exc
    return AccessPolicy(rules)
