"""Child processes of a benchmark run: start on loopback, poll until healthy, measure, stop.

Readiness is decided by polling a health URL, never by sleeping a fixed time;
the short pause between polls only paces the polling.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.05


BENCH_ROOT = Path(__file__).resolve().parent.parent


def child_env() -> dict[str, str]:
    """Environment of child processes: unbuffered output, and ``bench`` importable from any cwd.

    ``BENCH_CHILD_PYTHONPATH``, where set, replaces ``PYTHONPATH`` in the children only: the servers then run
    another checkout's code (``/old/src:/old/client/src``) under this bench, for figures side by side.
    """
    path = os.environ.get("BENCH_CHILD_PYTHONPATH", os.environ.get("PYTHONPATH"))
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": f"{BENCH_ROOT}{os.pathsep}{path}" if path else str(BENCH_ROOT),
    }


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def rss_mib(pid: int) -> float:
    """Resident set size of a process in MiB, from ``/proc/PID/status`` (``VmRSS``).

    Raises:
        RuntimeError: the process has no ``VmRSS`` line (not Linux, or it exited).
    """
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) a process has used so far, in seconds, from ``/proc/PID/stat``."""
    # The command name (field 2) may hold spaces: the fields after it start past its closing parenthesis.
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ManagedProcess:
    """A server child process with a log file, stopped gracefully (SIGTERM, then SIGKILL).

    Args:
        name: Short name used in messages and the log file name.
        args: The command line.
        health_url: URL that answers 200 once the server is ready.
        log_dir: Folder for the process's combined stdout/stderr log.
    """

    def __init__(self, name: str, args: list[str], health_url: str, log_dir: Path) -> None:
        self.name = name
        self.args = args
        self.health_url = health_url
        self.log = log_dir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The process id (the process must have been started)."""
        if self.process is None:
            raise RuntimeError(f"{self.name} is not started")
        return self.process.pid

    def start(self) -> ManagedProcess:
        """Start the process and return once its health URL answers 200.

        Raises:
            RuntimeError: it exited or did not become healthy in time (the log is included).
        """
        self.launch()
        self.wait_healthy()
        return self

    def launch(self) -> None:
        """Start the process without waiting for it (see :meth:`wait_healthy`)."""
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=child_env())

    def wait_healthy(self) -> None:
        """Return once the launched process's health URL answers 200.

        Raises:
            RuntimeError: it exited or did not become healthy in time (the log is included).
        """
        if self.process is None:
            raise RuntimeError(f"{self.name} is not launched")
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        with httpx.Client(timeout=1.0) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
                try:
                    if client.get(self.health_url).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(POLL_INTERVAL_S)  # pacing of the health poll, not synchronisation
        self.stop()
        raise RuntimeError(f"{self.name} not healthy after {STARTUP_TIMEOUT_S}s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the process's log."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """SIGTERM and wait; SIGKILL if it does not exit in time."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def rss_mib(self) -> float:
        """The process's current resident set size in MiB."""
        return rss_mib(self.pid)

    def cpu_seconds(self) -> float:
        """The CPU time the process has used so far, in seconds."""
        return cpu_seconds(self.pid)


def stub_process(log_dir: Path, reply: str, routed: bool = True) -> tuple[ManagedProcess, str]:
    """The inference stub on a free loopback port; returns it (not started) and its root URL.

    Args:
        log_dir: Where its log goes.
        reply: The default text answer.
        routed: ``True`` for :mod:`bench.stub` (replies chosen by message content),
            ``False`` for the plain ``ferryman.testing.server`` (tool calls must be queued).
    """
    port = free_port()
    root = f"http://{HOST}:{port}"
    module = "bench.stub" if routed else "ferryman.testing.server"
    args = [sys.executable, "-m", module, "--host", HOST, "--port", str(port), "--default-reply", reply]
    return ManagedProcess("stub", args, f"{root}/v1/models", log_dir), root


def ferryman_process(
    log_dir: Path,
    db: str,
    inference_root: str,
    wrapper: list[str] | None = None,
    extra: Sequence[str] = (),
    name: str = "ferryman",
) -> tuple[ManagedProcess, str]:
    """``ferryman serve`` on a free loopback port; returns it (not started) and its base URL.

    Args:
        log_dir: Where its log goes.
        db: Passed through as ``--db`` (a SQLite path, or a postgresql:// or redis:// URL).
        inference_root: Root URL of the stub (``/v1`` is appended).
        wrapper: Command to prefix (e.g. a profiler); the server's PID is then the wrapper's child.
        extra: More ``ferryman serve`` arguments (``--config FILE``, ``--redis URL``).
        name: The process's name in messages and its log file's (one per replica).
    """
    port = free_port()
    base = f"http://{HOST}:{port}"
    args = [
        *(wrapper or []),
        sys.executable, "-m", "ferryman.cli.main", "serve",
        "--host", HOST,
        "--port", str(port),
        "--db", db,
        "--inference-url", f"{inference_root}/v1",
        "--log-level", "warning",
        *extra,
    ]  # fmt: skip
    return ManagedProcess(name, args, f"{base}/v1/health", log_dir), base
