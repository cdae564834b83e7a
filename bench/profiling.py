"""Optional profiling of the ferryman server under load with py-spy (``--profile``).

py-spy samples the running server from outside (no code change, no restart).
It records in its ``raw`` (collapsed stacks) format, which this module sums
into self time per function, self time per package and inclusive time per
ferryman function. py-spy is only needed with ``--profile``.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 15.0
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*)\)$")


def pyspy_binary() -> str:
    """Path of the ``py-spy`` executable (next to this Python first, then on PATH).

    Raises:
        RuntimeError: py-spy is not installed.
    """
    beside = Path(sys.executable).with_name("py-spy")
    if beside.exists():
        return str(beside)
    found = shutil.which("py-spy")
    if found is None:
        raise RuntimeError("--profile needs py-spy: pip install py-spy")
    return found


class PySpy:
    """A ``py-spy record`` attached to a process, started and stopped around a workload.

    Args:
        pid: The process to sample.
        out: File for the raw collapsed stacks.
        rate: Samples per second.
        gil: Sample only the thread holding the GIL (CPU spent in Python), not threads waiting for it.
    """

    def __init__(self, pid: int, out: Path, rate: int = 100, gil: bool = False) -> None:
        self.pid, self.out, self.rate, self.gil = pid, out, rate, gil
        self.log = out.with_suffix(".log")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Attach and return once py-spy reports it is sampling."""
        args = [
            pyspy_binary(), "record", "--pid", str(self.pid), "--format", "raw", "--output", str(self.out),
            "--rate", str(self.rate), "--full-filenames", "--nolineno", "--threads",
            *(["--gil"] if self.gil else []),
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Sampling process" not in self.log.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"py-spy did not start:\n{self.log.read_text(errors='replace')}")
            time.sleep(0.05)  # pacing of the log poll, not synchronisation

    def stop(self) -> Path:
        """Stop sampling (SIGINT makes py-spy write its output) and return the output file."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=60)
        return self.out


def package_of(path: str) -> str:
    """The package a source file belongs to: ``ferryman.storage``, ``pydantic``, ``stdlib:asyncio``..."""
    if "/site-packages/" in path:
        return path.split("/site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/src/ferryman/" in path:
        rest = path.split("/src/ferryman/", 1)[1]
        return "ferryman." + rest.split("/", 1)[0].removesuffix(".py")
    match = re.search(r"/lib/python3\.\d+/(.+)$", path)
    if match:
        return "stdlib:" + match.group(1).split("/", 1)[0].removesuffix(".py")
    return "other"


def _frames(stack: str) -> tuple[str, list[tuple[str, str]]]:
    thread = "?"
    frames: list[tuple[str, str]] = []
    for part in stack.split(";"):
        match = FRAME.match(part)
        if part.startswith("thread ") or match is None:
            thread = part if part.startswith("thread ") else thread
            continue
        frames.append((match.group("func"), match.group("file")))
    return thread, frames


def summarise(raw: Path, top: int = 20) -> dict[str, Any]:
    """Sum a raw py-spy profile.

    Args:
        raw: File of ``stack count`` lines.
        top: How many entries each ranking keeps.

    Returns:
        ``samples``; ``threads`` (share of samples per thread); ``self_by_package``;
        ``self_by_function``; ``inclusive_ferryman`` (ferryman's own functions);
        ``inclusive_libraries`` (functions outside the standard library, e.g. the
        openai client, pydantic, starlette) -- each a list of ``[name, percent]``.
    """
    total = 0
    threads: Counter[str] = Counter()
    by_package: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    libraries: Counter[str] = Counter()
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        thread, frames = _frames(stack)
        if not frames:
            continue
        total += count
        threads[thread] += count
        func, path = frames[-1]
        by_package[package_of(path)] += count
        by_function[f"{func} [{package_of(path)}]"] += count
        named = {(f"{f} [{package_of(p)}]", package_of(p)) for f, p in frames}
        for name, package in named:
            if package.startswith("ferryman"):
                inclusive[name] += count
            elif not package.startswith("stdlib:") and package not in ("other", "uvicorn", "starlette"):
                libraries[name] += count

    def ranked(counter: Counter[str]) -> list[list[Any]]:
        return [[name, round(100.0 * n / total, 1)] for name, n in counter.most_common(top)] if total else []

    return {
        "samples": total,
        "threads": ranked(threads),
        "self_by_package": ranked(by_package),
        "self_by_function": ranked(by_function),
        "inclusive_ferryman": ranked(inclusive),
        "inclusive_libraries": ranked(libraries),
    }
