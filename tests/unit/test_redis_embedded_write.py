"""The kernel's batch embedded in a store's script: its Lua block and how the script's refusals read."""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.errors import ConflictError, InternalError, NotFoundError
from ferryman.storage.redis.embedded import KERNEL_WRITE, with_kernel_errors
from ferryman.storage.redis.kernel import ERRORS
from ferryman.storage.redis.script import Outcome


@dataclass(frozen=True)
class Named:
    name: str


ERRORS_OF_SCRIPT = with_kernel_errors(
    {Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"session '{a.name}' not found")}, ERRORS
)


def test_the_kernels_refusal_reads_as_the_kernels_error() -> None:
    error = ERRORS_OF_SCRIPT[Outcome.CONFLICT](Named("s"), ["kernel", "conversation 'c' already exists"])
    assert isinstance(error, ConflictError) and str(error) == "conversation 'c' already exists"
    missing = ERRORS_OF_SCRIPT[Outcome.NOT_FOUND](Named("s"), ["kernel", "agent 'a' not found"])
    assert isinstance(missing, NotFoundError) and str(missing) == "agent 'a' not found"


def test_the_scripts_own_refusal_reads_as_its_own_error() -> None:
    error = ERRORS_OF_SCRIPT[Outcome.NOT_FOUND](Named("s"), [])
    assert isinstance(error, NotFoundError) and str(error) == "session 's' not found"


def test_a_refusal_of_its_own_that_the_script_never_gives_is_an_internal_error() -> None:
    assert isinstance(ERRORS_OF_SCRIPT[Outcome.CONFLICT](Named("s"), []), InternalError)


def test_the_block_reads_the_kernels_prefix_from_its_argument_and_ends_the_script_when_refused() -> None:
    assert "local P = kernel_prefix" in KERNEL_WRITE and "= ARGV[" not in KERNEL_WRITE
    assert KERNEL_WRITE.startswith("local kernel_written = (function()")
    assert KERNEL_WRITE.rstrip().endswith(
        "if kernel_written[1] ~= OK then return {kernel_written[1], 'kernel', unpack(kernel_written, 2)} end"
    )
