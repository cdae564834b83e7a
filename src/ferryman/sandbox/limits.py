"""The sandbox's limits as the model and the user read them: each names its value and its setting.

The kernel (:mod:`.kernel_main`, which imports nothing of ferryman) tells which
limit an error of the code came from by one of these values' names; the server
words it here, where the settings are known.
"""

from __future__ import annotations

from enum import StrEnum

from ferryman.sandbox_settings import SandboxSettings


class Limit(StrEnum):
    """A limit the code can run into."""

    MEMORY = "memory"
    PROCESSES = "processes"
    NETWORK = "network"
    FILE_SIZE = "file_size"
    OPEN_FILES = "open_files"
    SCRATCH = "scratch"
    TMP = "tmp"
    SPACE = "space"
    """``ENOSPC`` where the kernel could not tell which file system is full."""
    WALL = "wall"
    CPU = "cpu"
    KERNEL_CPU = "kernel_cpu"
    """A kill (``SIGKILL``): the kernel's CPU time in all, or the host's memory."""


def describe(limit: Limit, settings: SandboxSettings) -> str:
    """What was reached, with the limit's value and its setting (``sandbox.*`` in the config file)."""
    s = settings
    scratch = (
        f"scratch space limit of {s.max_scratch_mb} MB, {s.max_scratch_files} files in /work reached "
        "(sandbox.max_scratch_mb, sandbox.max_scratch_files)"
    )
    tmp = (
        f"/tmp limit of {s.max_file_mb} MB, {s.max_tmp_files} files reached "
        "(sandbox.max_file_mb, sandbox.max_tmp_files)"
    )
    messages = {
        Limit.MEMORY: f"memory limit of {s.memory_mb} MB reached (sandbox.memory_mb)",
        Limit.PROCESSES: f"process limit of {s.max_processes} reached (sandbox.max_processes; threads count too)",
        Limit.NETWORK: "no network in the sandbox",
        Limit.FILE_SIZE: f"file size limit of {s.max_file_mb} MB reached (sandbox.max_file_mb)",
        Limit.OPEN_FILES: f"open file limit of {s.max_open_files} reached (sandbox.max_open_files)",
        Limit.SCRATCH: scratch,
        Limit.TMP: tmp,
        Limit.SPACE: f"{scratch}, or {tmp}",
        Limit.WALL: f"time limit of {s.wall_seconds:g} s reached (sandbox.wall_seconds)",
        Limit.CPU: f"CPU time limit of {s.cpu_seconds} s reached (sandbox.cpu_seconds)",
        Limit.KERNEL_CPU: (
            f"the kernel's CPU time limit of {s.kernel_cpu_seconds} s reached (sandbox.kernel_cpu_seconds), "
            "or the host ran out of memory"
        ),
    }
    return messages[limit]


def hint(error: str | None, limit: str | None, settings: SandboxSettings) -> str | None:
    """The code's own error, with the limit it ran into on a line of its own (``limit``: a :class:`Limit` value)."""
    if error is None or limit is None:
        return error
    try:
        reached = Limit(limit)
    except ValueError:  # what the kernel said is not one of ours (the code wrote into the reply pipe)
        return error
    return f"{error.rstrip()}\n[sandbox] {describe(reached, settings)}"


def killed(limit: Limit, settings: SandboxSettings) -> str:
    """Why the kernel was killed (its state is lost)."""
    return f"killed: {describe(limit, settings)}"
