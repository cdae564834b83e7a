"""``ferryman serve --detach`` and ``ferryman stop``: real processes, a temporary FERRYMAN_HOME, the scripted model.

A command refused before it starts anything runs in the test's process (no interpreter start to wait for).
"""

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
from ferryman.cli.main import main
from support import Proc, free_port


def _ferryman(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``ferryman ARGV`` in a process of its own, ``FERRYMAN_HOME`` at ``home``."""
    env = {**os.environ, "FERRYMAN_HOME": str(home)}
    command = [sys.executable, "-m", "ferryman.cli.main", *argv]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180, check=False)


def _refused_here(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, list[str]]:
    """``ferryman ARGV`` in this process, ``FERRYMAN_HOME`` at ``home``: its exit status and lines on stderr.

    For a command refused before it starts anything: this process has imported the command already, so the
    refusal takes no interpreter start.
    """
    capsys.readouterr()
    with monkeypatch.context() as patched:
        patched.setenv("FERRYMAN_HOME", str(home))
        status = main(list(argv))
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    return status, captured.err.splitlines()


def _end(pid: int, started: str) -> None:
    """Kill what a failed test left running (only that very process)."""
    if pidfile.start_time(pid) == started:
        os.kill(pid, signal.SIGKILL)


def test_a_detached_server_answers_and_stop_ends_it_gracefully(
    tmp_path: Path,
    scripted_proc: tuple[Proc, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
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

        again, lines = _refused_here(home, monkeypatch, capsys, "serve", "--detach", "--port", str(free_port()), *flags)
        assert again == 2
        assert lines == [
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


def test_a_port_in_use_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        argv = ("serve", "--detach", "--port", str(port), "--inference-url", "http://127.0.0.1:9/v1")
        status, [line] = _refused_here(home, monkeypatch, capsys, *argv)
    assert status == 2
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
