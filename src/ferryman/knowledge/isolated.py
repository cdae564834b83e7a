"""Extracting a file's text in a child process, bounded in memory and time.

Parsing HTML, PDF, JSON or CSV can cost far more than the file's size: a
few megabytes of markup make a tree of hundreds of megabytes, a compressed PDF
stream unpacks to many times its size, deep nesting makes a parser quadratic.
The server parses these kinds (:data:`~.extract.PARSED_KINDS`) in a fresh
interpreter (:mod:`.extract_child`, which inherits nothing of the server's
memory, a loaded embedding model for instance) whose address space is capped
with ``RLIMIT_AS``, killed when it runs past its time. Whatever it cost goes back to the system when it
exits; a file over a limit fails with a message naming the limit and its
setting. Plain text is only decoded, in a worker thread of the server.

A small file pays for the child's start: about 35 ms, 50 for HTML, 130 for a
PDF (pypdf's import).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import signal
import sys
from dataclasses import dataclass

from ferryman.file_settings import DEFAULT_EXTRACTION_MEMORY_MB, DEFAULT_EXTRACTION_TIMEOUT_SECONDS

from . import extract_child
from .extract import PARSED_KINDS, UnreadableFile, file_kind, read_as

MEMORY_SETTING = "files.extraction_memory_mb"
TIMEOUT_SETTING = "files.extraction_timeout_seconds"


@dataclass(frozen=True)
class ExtractionLimits:
    """What extracting one file's text may cost.

    Attributes:
        memory_mb: The child's address space, its interpreter (about 20 MB, 45 with the PDF reader) and the
            file's bytes included (``files.extraction_memory_mb``).
        timeout_seconds: Wall-clock time from the child's start to its answer (``files.extraction_timeout_seconds``).
    """

    memory_mb: int = DEFAULT_EXTRACTION_MEMORY_MB
    timeout_seconds: float = DEFAULT_EXTRACTION_TIMEOUT_SECONDS


class ExtractionFailed(Exception):
    """The child failed in a way that says nothing about the file (a bug, or the system refused to run it)."""


async def extract_text_bounded(
    data: bytes, filename: str, mime_type: str | None, limits: ExtractionLimits | None = None
) -> str:
    """The text of a file (as :func:`~.extract.extract_text` reads it), parsed in a child process under ``limits``.

    Raises:
        UnreadableFile: an unsupported kind; an empty, broken or textless file; or one whose parse went past a
            limit (``invalid_file``, the message naming the limit and its setting).
        ExtractionFailed: the child could not run or failed unexpectedly.
    """
    limits = limits or ExtractionLimits()
    kind = file_kind(data, filename, mime_type)
    if kind not in PARSED_KINDS:
        return await asyncio.to_thread(read_as, kind, data)
    return await _in_child(kind, data, limits)


async def _in_child(kind: str, data: bytes, limits: ExtractionLimits) -> str:
    cpu_seconds = math.ceil(limits.timeout_seconds) + 1  # a backstop: the parent kills it first
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-P",  # not the server's working directory on the child's path: nothing there shadows a module
        "-m",
        extract_child.__name__,
        kind,
        str(limits.memory_mb),
        str(cpu_seconds),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(limits.timeout_seconds):
            out, err = await process.communicate(data)
    except TimeoutError:
        raise _over_time(limits) from None
    finally:
        if process.returncode is None:  # timed out or cancelled: nothing of it stays behind
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    return _outcome(process.returncode, out, err, limits)


def _outcome(code: int | None, out: bytes, err: bytes, limits: ExtractionLimits) -> str:
    if code == 0:
        return out.decode(*extract_child.ENCODING)
    if code == extract_child.UNREADABLE:
        refusal = json.loads(out)
        raise UnreadableFile(refusal["code"], refusal["message"])
    if code == extract_child.OUT_OF_MEMORY:
        raise UnreadableFile(
            "invalid_file",
            f"extracting the file's text needs more memory than the limit of {limits.memory_mb} MB ({MEMORY_SETTING})",
        )
    if code == -signal.SIGXCPU:
        raise _over_time(limits)
    detail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {code}"]
    raise ExtractionFailed(f"the extraction process failed: {detail[0]}")


def _over_time(limits: ExtractionLimits) -> UnreadableFile:
    return UnreadableFile(
        "invalid_file",
        f"extracting the file's text took longer than the limit of {limits.timeout_seconds:g} s ({TIMEOUT_SETTING})",
    )
