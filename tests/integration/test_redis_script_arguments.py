"""Typed scripts on a real Redis: the prologue reads each argument into the Lua local of its name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from redis.asyncio import Redis
from replicas import redis_database

from ferryman.errors import InvalidRequestError
from ferryman.redis_url import split_prefix
from ferryman.storage.redis.script import LUA_OUTCOMES, Outcome, Script, Scripts, values

pytestmark = pytest.mark.anyio


@pytest.fixture()
def deployment() -> Iterator[tuple[str, str]]:
    with redis_database() as prefixed:
        yield split_prefix(prefixed)


@dataclass(frozen=True)
class Echo:
    first: list[str]
    name: str | None
    count: int
    flag: bool
    second: list[str]


ECHO = Script(
    Echo,
    """
if count < 0 then return {INVALID} end
return {OK, P, name, count + 1, flag and 'yes' or 'no', #first, table.concat(first, ','), table.concat(second, ',')}
""",
    values,
    {Outcome.INVALID: lambda a, _: InvalidRequestError(f"negative: {a.count}")},
)


async def test_named_arguments_reach_lua_and_replies_come_back_typed(deployment: tuple[str, str]) -> None:
    url, prefix = deployment
    client = Redis.from_url(url, decode_responses=True)
    try:
        scripts = Scripts(client, prefix, "local P = ARGV[1]\n" + LUA_OUTCOMES)
        reply = await scripts.run(ECHO, Echo(first=["a", "b:c"], name=None, count=41, flag=True, second=[]))
        assert reply == [prefix, "", 42, "yes", 2, "a,b:c", ""]
        with pytest.raises(InvalidRequestError, match="negative: -1"):
            await scripts.run(ECHO, Echo(first=[], name="n", count=-1, flag=False, second=["x"]))
    finally:
        await client.aclose()


@dataclass(frozen=True)
class Blobs:
    blobs: list[bytes]


# Each blob's length in bytes and its first byte: binary arguments arrive unchanged.
BLOBS = Script(
    Blobs,
    """
local out = {OK}
for _, blob in ipairs(blobs) do out[#out + 1] = #blob .. ':' .. string.byte(blob, 1) end
return out
""",
    values,
)


async def test_bytes_arguments_reach_lua_unchanged(deployment: tuple[str, str]) -> None:
    url, prefix = deployment
    client = Redis.from_url(url, decode_responses=True)
    try:
        scripts = Scripts(client, prefix, "local P = ARGV[1]\n" + LUA_OUTCOMES)
        assert await scripts.run(BLOBS, Blobs(blobs=[b"\x80\x00\xff", b"\xfe"])) == ["3:128", "1:254"]
    finally:
        await client.aclose()
