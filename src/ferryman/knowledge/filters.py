"""OpenAI's attribute filters: a comparison (``eq``, ``ne``, ``gt``, ``gte``, ``lt``, ``lte``, ``in``, ``nin``)
or a compound (``and``/``or``) of filters, nested to any depth, matched against a file's attributes.

A filter is parsed once (a malformed one is a 400 naming what is wrong) into a
predicate over an attributes mapping. A comparison with an attribute the file
lacks is false (``ne`` and ``nin`` too: a missing value is not "different"), and
so is an ordering comparison between a string and a number.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from ferryman.errors import InvalidRequestError

Predicate = Callable[[Mapping[str, Any]], bool]

_ORDERING: dict[str, Callable[[Any, Any], bool]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}
_COMPARISONS = {"eq", "ne", "in", "nin", *_ORDERING}
_COMPOUNDS = {"and", "or"}
MAX_DEPTH = 16


def parse_filter(raw: Any, path: str = "filters", depth: int = 0) -> Predicate:
    """A predicate over attributes from a wire filter.

    Raises:
        InvalidRequestError: the filter is malformed (its message names the part at fault).
    """
    if depth > MAX_DEPTH:
        raise InvalidRequestError(f"{path}: filters nest at most {MAX_DEPTH} deep", "filters")
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"{path} must be an object", "filters")
    kind = raw.get("type")
    if kind in _COMPOUNDS:
        return _compound(raw, kind, path, depth)
    if kind in _COMPARISONS:
        return _comparison(raw, kind, path)
    allowed = ", ".join(sorted(_COMPARISONS | _COMPOUNDS))
    raise InvalidRequestError(f"{path}.type must be one of {allowed}", "filters")


def _compound(raw: dict[str, Any], kind: str, path: str, depth: int) -> Predicate:
    parts = raw.get("filters")
    if not isinstance(parts, list) or not parts:
        raise InvalidRequestError(f"{path}.filters must be a non-empty list of filters", "filters")
    predicates = [parse_filter(part, f"{path}.filters[{i}]", depth + 1) for i, part in enumerate(parts)]
    combine = all if kind == "and" else any
    return lambda attributes: combine(predicate(attributes) for predicate in predicates)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _comparison(raw: dict[str, Any], kind: str, path: str) -> Predicate:
    key = raw.get("key")
    if not isinstance(key, str) or not key:
        raise InvalidRequestError(f"{path}.key must be a non-empty string", "filters")
    if "value" not in raw:
        raise InvalidRequestError(f"{path}.value is required", "filters")
    value = raw["value"]
    if kind in ("in", "nin"):
        if not isinstance(value, list) or not all(_is_scalar(v) for v in value):
            raise InvalidRequestError(f"{path}.value must be a list of strings or numbers for '{kind}'", "filters")
        members = list(value)
        if kind == "in":
            return lambda attributes: key in attributes and _member(attributes[key], members)
        return lambda attributes: key in attributes and not _member(attributes[key], members)
    if not _is_scalar(value):
        raise InvalidRequestError(f"{path}.value must be a string, number or boolean for '{kind}'", "filters")
    if kind == "eq":
        return lambda attributes: key in attributes and _equal(attributes[key], value)
    if kind == "ne":
        return lambda attributes: key in attributes and not _equal(attributes[key], value)
    compare = _ORDERING[kind]
    return lambda attributes: key in attributes and _ordered(compare, attributes[key], value)


def _equal(left: Any, right: Any) -> bool:
    # A bool is an int to Python: True == 1 must not match across the two kinds.
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    return bool(left == right)


def _member(value: Any, members: list[Any]) -> bool:
    return any(_equal(value, member) for member in members)


def _ordered(compare: Callable[[Any, Any], bool], left: Any, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return False
    numbers = isinstance(left, int | float) and isinstance(right, int | float)
    strings = isinstance(left, str) and isinstance(right, str)
    return (numbers or strings) and compare(left, right)
