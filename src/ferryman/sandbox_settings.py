"""The code sandbox's settings (``sandbox:`` in the config file)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ferryman.home import ferryman_home


class SandboxSettings(BaseModel):
    """How code runs and what it may use.

    ``confinement`` is ``bubblewrap`` (namespaces, no network, only the Python
    runtime read-only and the session's scratch directory writable) or ``off``
    (unconfined: only for hosts where the operator accepts that; logged).
    The limits apply to each call (``cpu_seconds``, ``wall_seconds``,
    ``output_chars``), to each process of the session's kernel (``memory_mb`` of
    address space, ``max_file_mb`` per file written, ``max_open_files``, which
    also bounds the socket and pipe buffers it can fill) or to the kernel's
    processes together (``max_processes``, threads included); a kernel also
    stops after ``kernel_cpu_seconds`` of CPU in all and after ``idle_seconds``
    without a call (its scratch directory goes with it). The files one call
    returns (at most ``max_files_returned``) are within ``max_file_mb`` together.
    A session's scratch directory holds at most ``max_scratch_mb`` and
    ``max_scratch_files`` files, in memory (a tmpfs; see :mod:`ferryman.sandbox.scratch`); a
    kernel's ``/tmp`` holds ``max_file_mb`` and ``max_tmp_files`` files (the
    kernel's own two output files included), and goes with the kernel.

    Attributes:
        python: The interpreter the code runs under (the system's, not the server's virtual environment).
        runtime_paths: What is bound read-only into the sandbox for that interpreter (missing ones skipped).
        dir: Where sessions' scratch directories live (default ``$FERRYMAN_HOME/sandbox``).
        uid_base: When the server runs as root, each live kernel runs as its own uid, from a range of
            256 that each server process takes above ``uid_base`` (by its pid), so that ``max_processes``
            counts that kernel's processes alone.
    """

    confinement: Literal["bubblewrap", "off"] = "bubblewrap"
    python: str = "/usr/bin/python3"
    runtime_paths: list[str] = Field(default_factory=lambda: ["/usr/bin", "/usr/lib", "/usr/lib64"])
    bwrap: str = "bwrap"
    dir: str | None = None
    cpu_seconds: int = Field(default=10, gt=0)
    wall_seconds: float = Field(default=30.0, gt=0)
    memory_mb: int = Field(default=512, gt=0)
    max_processes: int = Field(default=32, gt=0)
    max_file_mb: int = Field(default=64, gt=0)
    max_scratch_mb: int = Field(default=256, gt=0)
    max_scratch_files: int = Field(default=10_000, gt=0)
    max_tmp_files: int = Field(default=1_000, gt=2)
    max_open_files: int = Field(default=256, ge=16)
    output_chars: int = Field(default=20_000, gt=0)
    kernel_cpu_seconds: int = Field(default=600, gt=0)
    idle_seconds: float = Field(default=900.0, gt=0)
    max_files_returned: int = Field(default=20, ge=0)
    uid_base: int = Field(default=1_500_000, gt=65_535)

    def directory(self) -> Path:
        """The scratch root: the configured one or ``$FERRYMAN_HOME/sandbox``."""
        if self.dir:
            return Path(self.dir)
        return ferryman_home() / "sandbox"
