"""The kernel's write batch inside another script of the store: a record and the store's own keys in one script.

A kind whose record has an anchor among the store's own keys (a vector store's chunk index, a conversation's
items) is written by one script of the store that checks the anchor's preconditions, runs the kernel's batch,
which checks all of its own before it writes anything, then writes the anchor: nothing can be left half made,
and it costs one ``EVALSHA``. :data:`KERNEL_WRITE` is the kernel's library and ``write.lua`` as one block of Lua
that such a script places between its checks and its writes. The block ends the script when the batch is
refused, with the kernel's outcome marked ``kernel`` (read by :func:`with_kernel_errors`); otherwise
``kernel_written[2]`` holds the batch's results (read by :meth:`.RedisKernel.embedded_results`).

The block runs the library and the batch in a function of their own, called at once: their names are local
to it, so the kernel's library does not shadow the store's, and its locals do not count against the 200 that
Lua 5.1 allows the store's script.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ferryman.errors import FerrymanError, InternalError
from ferryman.storage.redis.script import ErrorOf, Outcome


@dataclass(frozen=True)
class KernelWrite:
    """What the kernel's batch takes inside another script: a base of that script's arguments (filled by
    :meth:`.RedisKernel.embedded`)."""

    kernel_prefix: str
    kernel_ops: str
    kernel_schema: str


def _lua(name: str) -> str:
    return resources.files(__package__).joinpath("lua", name).read_text(encoding="utf-8")


def _block(library: str, write: str) -> str:
    prefix = "local P = ARGV[1]"
    if library.count(prefix) != 1:
        raise RuntimeError("the kernel's library no longer reads its prefix as the embedded write expects")
    return (
        "local kernel_written = (function()\n"
        + library.replace(prefix, "local P = kernel_prefix")
        + "\nlocal ops, schema = kernel_ops, kernel_schema\n"
        + write
        + "\nend)()\n"
        + "if kernel_written[1] ~= OK then return {kernel_written[1], 'kernel', unpack(kernel_written, 2)} end\n"
    )


KERNEL_WRITE = _block(_lua("lib.lua"), _lua("write.lua"))
"""The kernel's batch as a block of another script's body (its outcomes are the store's library's)."""


def _has(library: str) -> str:
    key = "local function rkey(k, id) return P .. 'r:' .. k .. ':' .. id end"
    if library.count(key) != 1:
        raise RuntimeError("the kernel's library no longer names a record's key as the embedded read expects")
    return (
        "local function kernel_has(k, id)\n"
        "  return redis.call('EXISTS', kernel_prefix .. 'r:' .. k .. ':' .. id) == 1\n"
        "end\n"
    )


KERNEL_HAS = _has(_lua("lib.lua"))
"""``kernel_has(kind, id)``: whether the kernel holds a record, for a script taking a :class:`KernelWrite` to
decide its batch by (a record's key as the kernel's library names it)."""


def with_kernel_errors(
    errors: Mapping[Outcome, ErrorOf[Any]], kernel_errors: Mapping[Outcome, Any]
) -> dict[Outcome, ErrorOf[Any]]:
    """A script's errors, with the kernel's for the outcomes its embedded batch answered.

    Args:
        errors: What the script's own refusals mean.
        kernel_errors: What the kernel's outcomes mean (``(None, values) -> error``).
    """

    def either(outcome: Outcome) -> ErrorOf[Any]:
        def error(args: Any, found: list[Any]) -> FerrymanError:
            if found[:1] == ["kernel"] and outcome in kernel_errors:
                return kernel_errors[outcome](None, found[1:])  # type: ignore[no-any-return]
            own = errors.get(outcome)
            if own is None:
                return InternalError(f"a Redis script answered '{outcome}' for itself, which it never should")
            return own(args, found)

        return error

    return {outcome: either(outcome) for outcome in {*errors, *kernel_errors}}
