"""``ferryman serve --detach`` and ``ferryman stop``: real processes, a temporary FERRYMAN_HOME, the scripted model."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ferryman.cli import pidfile
from support import Proc, free_port


def _ferryman(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``ferryman ARGV`` in a process of its own, ``FERRYMAN_HOME`` at ``home``."""
    env = {**os.environ, "FERRYMAN_HOME": str(home)}
    command = [sys.executable, "-m", "ferryman.cli.main", *argv]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180, check=False)


def _end(pid: int, started: str) -> None:
    """Kill what a failed test left running (only that very process)."""
    if pidfile.start_time(pid) == started:
        os.kill(pid, signal.SIGKILL)


def test_a_detached_server_answers_and_stop_ends_it_gracefully(tmp_path: Path, scripted_proc: tuple[Proc, str]) -> None:
    home, port = tmp_path / "home", free_port()
    url = f"http://127.0.0.1:{port}"
    flags = ["--db", str(tmp_path / "d.db"), "--inference-url", f"{scripted_proc[1]}/v1", "--log-level", "info"]
    started = _ferryman(home, "serve", "--detach", "--port", str(port), *flags, "--json")
    assert started.returncode == 0, started.stderr
    shown = json.loads(started.stdout)
    pid = shown["pid"]
    record = json.loads((home / "server.pid").read_text())
    try:
        assert shown == {"url": url, "pid": pid, "log": str(home / "server.log"), "pidfile": str(home / "server.pid")}
        assert record["pid"] == pid and "serve" in record["command"] and "--detach" not in record["command"]
        assert httpx.get(f"{url}/v1/health", timeout=10).status_code == 200

        again = _ferryman(home, "serve", "--detach", "--port", str(free_port()), *flags)
        assert again.returncode == 2
        assert again.stderr.splitlines() == [
            f"ferryman: a server started with 'ferryman serve --detach' is already running at {url} (pid {pid}): "
            "stop it first with 'ferryman stop'"
        ]

        stopped = _ferryman(home, "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.splitlines() == [f"stopped the server at {url} (pid {pid})"]
        assert pidfile.start_time(pid) is None and not (home / "server.pid").exists()
        assert "Finished server process" in (home / "server.log").read_text()  # SIGTERM: a graceful shutdown
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/v1/health", timeout=10)
    finally:
        _end(pid, record["started"])

    none = _ferryman(home, "stop")
    assert none.returncode == 0
    assert none.stdout.startswith("no server started with 'ferryman serve --detach' is running")


def test_a_detached_server_that_fails_to_start_is_one_line_and_leaves_no_pidfile(
    tmp_path: Path, scripted_proc: tuple[Proc, str]
) -> None:
    home = tmp_path / "home"
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"not a database" * 512)  # found only when the server opens it
    argv = ["serve", "--detach", "--port", str(free_port()), "--db", str(broken)]
    failed = _ferryman(home, *argv, "--inference-url", f"{scripted_proc[1]}/v1")
    assert failed.returncode == 1 and failed.stdout == ""
    [line] = failed.stderr.splitlines()
    assert line.startswith("ferryman: the server did not start: ") and "file is not a database" in line
    assert line.endswith(f"(see {home / 'server.log'})")
    assert not (home / "server.pid").exists()


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        refused = _ferryman(home, "serve", "--detach", "--port", str(port), "--inference-url", "http://127.0.0.1:9/v1")
    assert refused.returncode == 2
    [line] = refused.stderr.splitlines()
    assert line.startswith(f"ferryman: cannot listen on 127.0.0.1 port {port}: ")
    assert not (home / "server.pid").exists() and not (home / "server.log").exists()


def test_a_client_command_says_when_the_detached_server_has_exited(
    tmp_path: Path, scripted_proc: tuple[Proc, str]
) -> None:
    home, port = tmp_path / "home", free_port()
    flags = ["--port", str(port), "--db", str(tmp_path / "d.db"), "--inference-url", f"{scripted_proc[1]}/v1"]
    started = _ferryman(home, "serve", "--detach", *flags, "--json")
    assert started.returncode == 0, started.stderr
    record = json.loads((home / "server.pid").read_text())
    os.kill(record["pid"], signal.SIGKILL)  # a crash: the pidfile stays
    try:
        chat = _ferryman(home, "chat", "--url", f"http://localhost:{port}", "--wait", "0.5", "Hi")
    finally:
        _end(record["pid"], record["started"])
    assert chat.returncode == 2 and chat.stdout == ""
    waiting, error = chat.stderr.splitlines()
    exited = f"(the server 'ferryman serve --detach' started there, pid {record['pid']}, has exited: see "
    assert waiting.startswith(f"waiting for the server at http://localhost:{port} (up to 0.5 s)…")
    assert exited in waiting
    assert error.startswith(f"error: cannot reach http://localhost:{port}") and exited in error
