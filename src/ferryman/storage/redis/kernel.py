"""The storage kernel on Redis: every batch, read and sweep is one Lua script, so one round trip, atomically.

Four scripts run after one library (``lua/lib.lua``): ``write.lua`` (a write
batch, checked whole before it writes), ``read.lua`` (read operations on one
snapshot), ``renew.lua`` and ``claim.lua`` (leases). The key layout is in
:mod:`.keys`. The backend targets one Redis server (or a primary with
replicas), not Redis Cluster: scripts build their keys as they go.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis

from ferryman.errors import ConflictError, ForbiddenError, NotFoundError
from ferryman.storage.kernel.model import Kind, Rec, Schema
from ferryman.storage.kernel.ops import (
    Chain,
    CountStatus,
    Events,
    Get,
    GetMany,
    History,
    LogCount,
    Op,
    Page,
    ReadOp,
)
from ferryman.storage.redis import codec
from ferryman.storage.redis.keys import DEFAULT_PREFIX, check_names
from ferryman.storage.redis.script import LUA_OUTCOMES, Outcome, Script, ScriptCall, Scripts, values

_READS = (Get, GetMany, Page, CountStatus, Events, LogCount, History, Chain)


def _lua(name: str) -> str:
    return resources.files(__package__).joinpath("lua", name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Batch:
    """A write batch: its operations (JSON) and the schema (JSON)."""

    ops: str
    schema: str


@dataclass(frozen=True)
class Reads:
    """Read operations (JSON) and the schema (JSON)."""

    ops: str
    schema: str


@dataclass(frozen=True)
class Renew:
    """The leases of ``ids`` of ``kind`` moved to ``lease_until``."""

    kind: str
    ids: list[str]
    lease_until: float


@dataclass(frozen=True)
class Claim:
    """Expired leases of ``kind`` taken (``status``/``lease_until`` None: kept / dropped)."""

    kind: str
    now: float
    status: str | None
    lease_until: str | None
    limit: int
    exclusive: list[str]


def _answer(found: list[Any]) -> Any:
    return json.loads(found[0])


# Outcome has no "forbidden": the kernel's scripts answer INVALID for an operation the caller may not do.
ERRORS = {
    Outcome.NOT_FOUND: lambda _, found: NotFoundError(found[0]),
    Outcome.CONFLICT: lambda _, found: ConflictError(found[0]),
    Outcome.INVALID: lambda _, found: ForbiddenError(found[0]),
}
LIBRARY = LUA_OUTCOMES + _lua("lib.lua")
WRITE: Script[Batch, Any] = Script(Batch, _lua("write.lua"), _answer, ERRORS)
READ: Script[Reads, Any] = Script(Reads, _lua("read.lua"), _answer, ERRORS)
RENEW: Script[Renew, list[Any]] = Script(Renew, _lua("renew.lua"), values)
CLAIM: Script[Claim, Any] = Script(Claim, _lua("claim.lua"), _answer)


class RedisKernel:
    """A :class:`~ferryman.storage.kernel.protocol.Kernel` in one Redis database, under a key prefix.

    Args:
        client: The client to run on (``decode_responses=True``); its owner closes it. None: the owner
            sets :attr:`client` before :meth:`open` (a store that connects when it opens).
        schema: The kinds it stores (names without ``:``).
        prefix: Prepended to every key, so that several kernels can share a database.

    Raises:
        ValueError: a kind or log channel name of ``schema`` holds ``:``.
    """

    def __init__(self, client: Redis | None, schema: Schema, prefix: str = DEFAULT_PREFIX) -> None:
        check_names(schema)
        self.client = client
        self.schema = schema
        self.prefix = prefix
        self._schema_json = codec.schema_json(schema)
        self._scripts: Scripts | None = None

    async def open(self) -> None:
        """Check the server answers; the scripts load themselves on first use."""
        if self.client is None:
            raise RuntimeError("the Redis kernel has no client to open")
        await self.client.ping()
        self._scripts = Scripts(self.client, self.prefix, LIBRARY)

    async def close(self) -> None:
        """Forget the scripts (the client stays open: it is its owner's)."""
        self._scripts = None

    @property
    def _run(self) -> Scripts:
        if self._scripts is None:
            raise RuntimeError("the Redis kernel is not open")
        return self._scripts

    async def write(self, ops: Sequence[Op]) -> list[Any]:
        """Run a batch as one script: every precondition checked, then every operation applied, in order."""
        if not ops:
            return []
        batch = Batch(self._encode(ops), self._schema_json)
        return self.write_results(ops, await self._run.run(WRITE, batch))

    def embedded(self, ops: Sequence[Op]) -> dict[str, Any]:
        """The arguments (a :class:`~.embedded.KernelWrite`'s fields) with which another script of the same
        database writes ``ops`` through :data:`~.embedded.KERNEL_WRITE`; :meth:`embedded_results` reads them."""
        return {
            "kernel_prefix": self.prefix,
            "kernel_ops": self._encode(ops),
            "kernel_schema": self._schema_json,
        }

    def embedded_results(self, ops: Sequence[Op], found: list[Any]) -> list[Any]:
        """The results of ``ops`` from the values a script answered after its embedded batch's (``OK, results``)."""
        return self.write_results(ops, json.loads(found[0]))

    def write_results(self, ops: Sequence[Op], found: list[Any]) -> list[Any]:
        """The results of ``ops`` from what their script answered."""
        return [codec.decode(op, value) for op, value in zip(ops, found, strict=True)]

    async def read(self, ops: Sequence[ReadOp]) -> list[Any]:
        """Run read operations as one script, so on one snapshot."""
        if not ops:
            return []
        return self.read_results(ops, await self._run.run(READ, self._reads(ops)))

    def read_call(self, ops: Sequence[ReadOp]) -> ScriptCall[Reads, list[Any]]:
        """The script that answers ``ops``, to send beside another in one trip; :meth:`read_results` reads it."""
        return self._run.call(READ, self._reads(ops))

    def read_results(self, ops: Sequence[ReadOp], found: list[Any]) -> list[Any]:
        """The results of ``ops`` from what their script answered."""
        return [codec.decode(op, value) for op, value in zip(ops, found, strict=True)]

    def _reads(self, ops: Sequence[ReadOp]) -> Reads:
        for op in ops:
            if not isinstance(op, _READS):
                raise TypeError(f"read() takes read operations only, not {type(op).__name__}")
        return Reads(self._encode(ops), self._schema_json)

    async def renew(self, kind: Kind, ids: Sequence[str], until: float) -> list[str]:
        """Move the lease of each listed record that holds one to ``until``; the result: the ids renewed."""
        if not ids:
            return []
        return [str(found) for found in await self._run.run(RENEW, Renew(kind.name, list(ids), until))]

    async def claim_expired(
        self, kind: Kind, now: float, *, status: str | None, lease_until: float | None, limit: int
    ) -> list[Rec]:
        """Take up to ``limit`` records whose lease ended before ``now``, oldest first, in one script.

        A record whose new status would take an exclusive slot another record holds is left unclaimed.
        """
        lease = None if lease_until is None else repr(float(lease_until))
        claim = Claim(kind.name, now, status, lease, limit, sorted(kind.exclusive))
        return codec.records(await self._run.run(CLAIM, claim))

    def _encode(self, ops: Sequence[Op]) -> str:
        return json.dumps([codec.encode(op, self.schema) for op in ops], ensure_ascii=False, separators=(",", ":"))
