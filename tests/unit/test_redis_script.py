"""Typed Redis scripts: arguments become named Lua locals, replies become results or ferryman's errors."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from redis.asyncio import Redis

from ferryman.errors import FailureCode, InternalError, NotFoundError
from ferryman.storage.redis import lua_chunks as redis_lua_chunks
from ferryman.storage.redis import lua_idempotency as redis_lua_idempotency
from ferryman.storage.redis import lua_knowledge as redis_lua_knowledge
from ferryman.storage.redis import lua_responses as redis_lua_responses
from ferryman.storage.redis import lua_turns as redis_lua_turns
from ferryman.storage.redis import scripts as redis_scripts
from ferryman.storage.redis.script import Outcome, Script, Scripts, nothing, values


@dataclass(frozen=True)
class Sample:
    name: str
    missing: str | None
    count: int
    score: float
    flag: bool
    code: FailureCode
    items: list[str]


SAMPLE = Script(
    Sample,
    "return {OK, name, count, flag}",
    values,
    {Outcome.NOT_FOUND: lambda a, found: NotFoundError(f"{a.name} {found}")},
)


@dataclass(frozen=True)
class Blobs:
    blobs: list[bytes]


BLOBS = Script(Blobs, "return {OK, #blobs}", values)


def test_arguments_travel_in_field_order_lists_with_their_length() -> None:
    args = Sample("n", None, 3, float("-inf"), True, FailureCode.INTERRUPTED, ["a", "b"])
    assert SAMPLE.argv(args) == ["n", "", "3", "-inf", "1", "interrupted", "2", "a", "b"]
    assert BLOBS.argv(Blobs([b"\x80", b""])) == ["2", b"\x80", b""]
    assert "local items = {}" in SAMPLE.prologue and "local flag = ARGV[_at] == '1'" in SAMPLE.prologue


def test_a_reply_is_its_result_or_the_error_its_outcome_means() -> None:
    args = Sample("n", None, 0, 0.0, False, FailureCode.CONFLICT, [])
    assert SAMPLE.decode(args, ["ok", "x", 1]) == ["x", 1]
    with pytest.raises(NotFoundError, match=r"n \['why'\]"):
        SAMPLE.decode(args, ["not_found", "why"])
    with pytest.raises(InternalError, match="answered 'conflict'"):
        SAMPLE.decode(args, ["conflict"])
    with pytest.raises(TypeError):
        SAMPLE.argv(object())  # type: ignore[arg-type]


def test_an_argument_type_lua_cannot_read_is_refused_at_definition() -> None:
    @dataclass(frozen=True)
    class Nested:
        pairs: list[tuple[str, str]]

    with pytest.raises(TypeError, match="cannot be of type"):
        Script(Nested, "return {OK}", nothing)


def test_every_script_of_the_backend_registers_without_shadowing_the_library() -> None:
    scripts = Scripts(Redis(), "p:", redis_scripts.LIBRARY)
    modules = (
        redis_scripts,
        redis_lua_turns,
        redis_lua_responses,
        redis_lua_idempotency,
        redis_lua_knowledge,
        redis_lua_chunks,
    )
    found = [value for module in modules for value in vars(module).values() if isinstance(value, Script)]
    assert len(found) >= 20
    for script in found:
        assert scripts._register(script) is not None

    @dataclass(frozen=True)
    class Shadows:
        key: str

    with pytest.raises(TypeError, match="shadow library names"):
        scripts._register(Script(Shadows, "return {OK}", nothing))
