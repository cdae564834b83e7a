"""OpenAI's attribute filters: comparisons, compounds, missing keys, mixed kinds, and malformed filters."""

from __future__ import annotations

from typing import Any

import pytest

from ferryman.errors import InvalidRequestError
from ferryman.knowledge.filters import MAX_DEPTH, parse_filter

FILE = {"animal": "cat", "year": 2024, "score": 0.5, "draft": True}


def matches(raw: dict[str, Any], attributes: dict[str, Any] = FILE) -> bool:
    return parse_filter(raw)(attributes)


@pytest.mark.parametrize(
    ("kind", "key", "value", "expected"),
    [
        ("eq", "animal", "cat", True),
        ("eq", "animal", "dog", False),
        ("ne", "animal", "dog", True),
        ("ne", "animal", "cat", False),
        ("gt", "year", 2023, True),
        ("gt", "year", 2024, False),
        ("gte", "year", 2024, True),
        ("lt", "score", 1, True),
        ("lte", "score", 0.5, True),
        ("lt", "year", 2024.0, False),
        ("gt", "animal", "bat", True),  # strings order as strings
        ("in", "animal", ["dog", "cat"], True),
        ("in", "animal", ["dog"], False),
        ("nin", "animal", ["dog"], True),
        ("nin", "year", [2024], False),
        ("eq", "draft", True, True),
    ],
)
def test_comparisons(kind: str, key: str, value: Any, expected: bool) -> None:
    assert matches({"type": kind, "key": key, "value": value}) is expected


@pytest.mark.parametrize("kind", ["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"])
def test_an_attribute_the_file_lacks_never_matches(kind: str) -> None:
    value: Any = ["x"] if kind in ("in", "nin") else "x"
    assert not matches({"type": kind, "key": "colour", "value": value})


def test_kinds_do_not_mix() -> None:
    assert not matches({"type": "eq", "key": "draft", "value": 1})  # True is not 1
    assert not matches({"type": "eq", "key": "year", "value": True}, {"year": 1})
    assert not matches({"type": "in", "key": "draft", "value": [1]})
    assert not matches({"type": "gt", "key": "year", "value": "2000"})  # a number is not ordered against a string
    assert not matches({"type": "lt", "key": "draft", "value": 5})  # nor a boolean
    assert matches({"type": "eq", "key": "year", "value": 2024.0})  # int and float are one kind


def test_compounds_nest() -> None:
    cat_or_old = {
        "type": "or",
        "filters": [
            {"type": "eq", "key": "animal", "value": "dog"},
            {
                "type": "and",
                "filters": [
                    {"type": "gte", "key": "year", "value": 2020},
                    {"type": "eq", "key": "draft", "value": True},
                ],
            },
        ],
    }
    assert matches(cat_or_old)
    assert not matches(cat_or_old, {"animal": "cat", "year": 2024, "draft": False})
    assert matches(cat_or_old, {"animal": "dog"})
    both = {
        "type": "and",
        "filters": [{"type": "eq", "key": "animal", "value": "cat"}, {"type": "lt", "key": "year", "value": 2000}],
    }
    assert not matches(both)


def _nested(depth: int) -> dict[str, Any]:
    raw: dict[str, Any] = {"type": "eq", "key": "animal", "value": "cat"}
    for _ in range(depth):
        raw = {"type": "and", "filters": [raw]}
    return raw


def test_nesting_is_bounded() -> None:
    assert matches(_nested(MAX_DEPTH))
    with pytest.raises(InvalidRequestError, match="nest"):
        parse_filter(_nested(MAX_DEPTH + 1))


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ("eq", "filters must be an object"),
        ({"type": "like", "key": "a", "value": "b"}, "filters.type must be one of"),
        ({"type": "eq", "value": "b"}, "filters.key"),
        ({"type": "eq", "key": "", "value": "b"}, "filters.key"),
        ({"type": "eq", "key": "a"}, "filters.value is required"),
        ({"type": "eq", "key": "a", "value": ["b"]}, "filters.value must be a string, number or boolean"),
        ({"type": "in", "key": "a", "value": "b"}, "filters.value must be a list"),
        ({"type": "in", "key": "a", "value": [{"x": 1}]}, "filters.value must be a list"),
        ({"type": "and", "filters": []}, "filters.filters must be a non-empty list"),
        ({"type": "or", "filters": [{"type": "eq", "key": "a"}]}, r"filters.filters\[0\].value is required"),
    ],
)
def test_a_malformed_filter_is_a_400_naming_the_part_at_fault(raw: Any, said: str) -> None:
    with pytest.raises(InvalidRequestError, match=said) as caught:
        parse_filter(raw)
    assert caught.value.field == "filters"
