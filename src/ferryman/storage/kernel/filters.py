"""Which records a caller may see or act on, as data each backend turns into its own query.

A filter is evaluated against a record's owner terms (see
:meth:`~ferryman.storage.kernel.model.Owner.terms`) and its id. The access
policy compiles to one of these per caller, action and kind, so a filtered page
is answered by the database's index on terms, never by reading every record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class All:
    """Every record."""


@dataclass(frozen=True)
class Nothing:
    """No record."""


@dataclass(frozen=True)
class Terms:
    """Records holding at least one of these owner terms."""

    terms: frozenset[str]


@dataclass(frozen=True)
class IdIn:
    """Records with one of these ids."""

    ids: frozenset[str]


@dataclass(frozen=True)
class Not:
    """Records the inner filter excludes."""

    inner: Filter


@dataclass(frozen=True)
class And:
    """Records every part admits."""

    parts: tuple[Filter, ...]


@dataclass(frozen=True)
class Or:
    """Records some part admits."""

    parts: tuple[Filter, ...]


Filter = Union[All, Nothing, Terms, IdIn, Not, And, Or]  # noqa: UP007  # a runtime alias of a recursive union
ALL = All()
NOTHING = Nothing()


def admits(flt: Filter, terms: frozenset[str], record_id: str) -> bool:
    """Whether ``flt`` admits a record with these owner terms and this id (the reference semantics)."""
    if isinstance(flt, All):
        return True
    if isinstance(flt, Nothing):
        return False
    if isinstance(flt, Terms):
        return not flt.terms.isdisjoint(terms)
    if isinstance(flt, IdIn):
        return record_id in flt.ids
    if isinstance(flt, Not):
        return not admits(flt.inner, terms, record_id)
    if isinstance(flt, And):
        return all(admits(part, terms, record_id) for part in flt.parts)
    return any(admits(part, terms, record_id) for part in flt.parts)


def any_of(parts: Iterable[Filter]) -> Filter:
    """The disjunction of ``parts``, simplified (constants folded, term sets merged)."""
    kept: list[Filter] = []
    terms: set[str] = set()
    for part in _flatten(parts, Or):
        if isinstance(part, All):
            return ALL
        if isinstance(part, Terms):
            terms.update(part.terms)
        elif not isinstance(part, Nothing):
            kept.append(part)
    if terms:
        kept.insert(0, Terms(frozenset(terms)))
    if not kept:
        return NOTHING
    return kept[0] if len(kept) == 1 else Or(tuple(kept))


def all_of(parts: Iterable[Filter]) -> Filter:
    """The conjunction of ``parts``, simplified (constants folded)."""
    kept: list[Filter] = []
    for part in _flatten(parts, And):
        if isinstance(part, Nothing):
            return NOTHING
        if not isinstance(part, All):
            kept.append(part)
    if not kept:
        return ALL
    return kept[0] if len(kept) == 1 else And(tuple(kept))


def negate(flt: Filter) -> Filter:
    """The complement of ``flt``, simplified."""
    if isinstance(flt, All):
        return NOTHING
    if isinstance(flt, Nothing):
        return ALL
    if isinstance(flt, Not):
        return flt.inner
    return Not(flt)


def _flatten(parts: Iterable[Filter], kind: type[And] | type[Or]) -> Iterable[Filter]:
    for part in parts:
        if isinstance(part, kind):
            yield from _flatten(part.parts, kind)
        else:
            yield part


def to_json(flt: Filter) -> object:
    """The filter as JSON (what a Redis script evaluates): ``["all"]``, ``["terms", [...]]``, ``["or", [...]]``…"""
    if isinstance(flt, All):
        return ["all"]
    if isinstance(flt, Nothing):
        return ["nothing"]
    if isinstance(flt, Terms):
        return ["terms", sorted(flt.terms)]
    if isinstance(flt, IdIn):
        return ["ids", sorted(flt.ids)]
    if isinstance(flt, Not):
        return ["not", to_json(flt.inner)]
    return ["and" if isinstance(flt, And) else "or", [to_json(part) for part in flt.parts]]
