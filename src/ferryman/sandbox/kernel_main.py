"""The kernel that runs inside the sandbox: one Python namespace, fed code over a framed pipe.

This file runs under the sandbox's own interpreter (standard library only) and
imports nothing of ferryman. Each request and reply is a 4-byte big-endian
length followed by that many bytes of UTF-8 JSON. A request is
``{"code": "..."}``; the reply is ``{"stdout", "stderr", "result", "error", "limit"}``:
``result`` is the ``repr`` of a final expression statement (as a notebook shows it),
``error`` the formatted exception the code raised, and ``limit`` which of the
sandbox's limits that exception comes from, if it does (a value of
``ferryman.sandbox.limits.Limit``, which the server words).
"""

from __future__ import annotations

import ast
import contextlib
import errno
import io
import json
import os
import resource
import socket
import struct
import sys
import traceback
from typing import Any, BinaryIO

_HEADER = struct.Struct(">I")
_FILENAME = "<code>"
_NETWORK_ERRNOS = {errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH}
_SCRATCH = os.getcwd()  # where the kernel starts: its scratch space (/work when confined)


def _read_frame(stream: BinaryIO) -> dict[str, Any] | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (length,) = _HEADER.unpack(header)
    request: dict[str, Any] = json.loads(stream.read(length).decode("utf-8"))
    return request


def _write_frame(stream: BinaryIO, reply: dict[str, Any]) -> None:
    data = json.dumps(reply).encode("utf-8")
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


def _allow_cpu(seconds: int) -> None:
    """Let this call use ``seconds`` more CPU seconds (the soft limit; the hard one bounds the kernel's life)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(usage.ru_utime + usage.ru_stime) + seconds
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _run(code: str, namespace: dict[str, Any], process_limit: int) -> tuple[str | None, str | None, str | None]:
    """Execute ``code``; return the repr of its final expression, the error it raised and the limit behind it.

    ``process_limit`` is the sandbox's own ``RLIMIT_NPROC`` (0: none; only a root server gives each kernel a
    uid of its own to count).
    """
    try:
        tree = ast.parse(code, _FILENAME, "exec")
        final = tree.body[-1] if tree.body else None
        last: ast.expr | None = None
        if isinstance(final, ast.Expr):
            tree.body.pop()
            last = final.value
        exec(compile(tree, _FILENAME, "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last), _FILENAME, "eval"), namespace)
            if value is not None:
                return repr(value), None, None
        return None, None, None
    except BaseException as exc:  # the user's code may raise anything, SystemExit included
        frames = traceback.extract_tb(exc.__traceback__)
        own = [frame for frame in frames if frame.filename == _FILENAME]
        lines = traceback.format_list(own) + traceback.format_exception_only(type(exc), exc)
        error = "Traceback (most recent call last):\n" + "".join(lines) if own else "".join(lines)
        return None, error, _limit_behind(exc, process_limit)


def _limit_behind(error: BaseException, process_limit: int) -> str | None:
    """The sandbox limit that ``error``, or an error it was raised from or while handling, comes from."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        limit = _limit_of(current, process_limit > 0)
        if limit is not None:
            return limit
        current = current.__cause__ or current.__context__
    return None


def _limit_of(error: BaseException, processes_limited: bool) -> str | None:
    if isinstance(error, MemoryError):
        return "memory"
    if isinstance(error, RuntimeError) and "can't start new thread" in str(error):
        return "processes" if processes_limited else None
    if isinstance(error, socket.gaierror):  # no resolver, no /etc/hosts: no name resolves
        return "network"
    if not isinstance(error, OSError):
        return None
    if error.errno in _NETWORK_ERRNOS:
        return "network"
    if error.errno == errno.EAGAIN and processes_limited:  # fork() and clone() past RLIMIT_NPROC
        return "processes"
    if error.errno == errno.EMFILE:
        return "open_files"
    if error.errno == errno.EFBIG:  # the interpreter ignores SIGXFSZ: a write past RLIMIT_FSIZE fails so
        return "file_size"
    if error.errno == errno.ENOSPC:
        full = [name for name, path in (("scratch", _SCRATCH), ("tmp", "/tmp")) if _is_full(path)]
        return full[0] if len(full) == 1 else "space"
    return None


def _is_full(path: str) -> bool:
    try:
        info = os.statvfs(path)
    except OSError:
        return False
    return info.f_bavail == 0 or info.f_favail == 0


def _read_back(fd_file: BinaryIO) -> str:
    fd_file.seek(0)
    text = fd_file.read().decode("utf-8", "replace")
    fd_file.seek(0)
    fd_file.truncate()
    return text


def main() -> None:
    """Serve requests until the pipe closes."""
    cpu_seconds, output_chars, process_limit = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    # What the code or its subprocesses write to fds 1 and 2 goes to files read back after each call,
    # so that nothing the code does can write into the reply pipe by accident.
    fd_out = open(os.path.join("/tmp", ".kernel-stdout"), "w+b")  # noqa: SIM115 (lives as long as the kernel)
    fd_err = open(os.path.join("/tmp", ".kernel-stderr"), "w+b")  # noqa: SIM115
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(fd_out.fileno(), 1)
    os.dup2(fd_err.fileno(), 2)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    kernel_pid = os.getpid()
    while (request := _read_frame(requests)) is not None:
        out, err = io.StringIO(), io.StringIO()
        _allow_cpu(cpu_seconds)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            result, error, limit = _run(str(request.get("code", "")), namespace, process_limit)
        if os.getpid() != kernel_pid:
            os._exit(0)  # a process the code forked came back here: only the kernel answers
        sys.stdout.flush()
        sys.stderr.flush()
        reply = {
            "stdout": _clip(out.getvalue() + _read_back(fd_out), output_chars),
            "stderr": _clip(err.getvalue() + _read_back(fd_err), output_chars),
            "result": _clip(result, output_chars) if result is not None else None,
            "error": _clip(error, output_chars) if error is not None else None,
            "limit": limit,
        }
        _write_frame(replies, reply)


if __name__ == "__main__":
    main()
