"""Starting real processes for tests: the scripted model server and ferryman itself."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

STARTUP_TIMEOUT = 120.0


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``url`` until it answers 200, failing early if the process dies."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{url} not healthy after {STARTUP_TIMEOUT}s:\n{log.read_text()}")


LAUNCHED: list[Proc] = []
"""Every process this test worker launched: a failed test's report shows what their logs gained during it."""


class Proc:
    """A child process with its log file."""

    def __init__(self, args: list[str], health_url: str, log: Path) -> None:
        self.args, self.health_url, self.log = args, health_url, log
        self.process: subprocess.Popen[bytes] | None = None

    def launch(self) -> Proc:
        """Start, without waiting until healthy (see :meth:`wait_healthy`)."""
        with self.log.open("ab") as out:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=env)
        LAUNCHED.append(self)
        return self

    def wait_healthy(self) -> Proc:
        """Wait until the launched process answers its health URL."""
        assert self.process is not None, "launch() first"
        wait_until_healthy(self.health_url, self.process, self.log)
        return self

    def start(self) -> Proc:
        """Start and wait until healthy."""
        return self.launch().wait_healthy()

    def stop(self) -> None:
        """Terminate gracefully (SIGTERM), then kill if needed."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()


def scripted_server(tmp: Path, *models: str) -> tuple[Proc, str]:
    """Start ``ferryman.testing.server`` (listing ``models``, default ``scripted-model``); return it and its URL."""
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "ferryman.testing.server", "--port", str(port)]
    for model in models:
        args += ["--model", model]
    return Proc(args, f"{root}/v1/models", tmp / f"scripted-{port}.log").start(), root


def ferryman_server(tmp: Path, inference_root: str | None, db: Path | str, *extra: str) -> tuple[Proc, str]:
    """Start ``ferryman serve`` on a free port; return it and its base URL.

    ``inference_root`` is a scripted server's root URL, or None when ``extra``
    configures the providers itself (``--config``).
    """
    proc, base = ferryman_proc(tmp, inference_root, db, *extra)
    return proc.start(), base


def ferryman_proc(tmp: Path, inference_root: str | None, db: Path | str, *extra: str) -> tuple[Proc, str]:
    """``ferryman serve`` on a free port, not launched yet, and its base URL (see :func:`ferryman_server`)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    inference = ["--inference-url", f"{inference_root}/v1"] if inference_root else []
    args = [
        sys.executable, "-m", "ferryman.cli.main", "serve",
        "--port", str(port),
        "--db", str(db),
        *inference,
        "--log-level", "warning",
        *extra,
    ]  # fmt: skip
    return Proc(args, f"{base}/v1/health", tmp / f"ferryman-{port}.log"), base


@contextmanager
def running(proc: Proc) -> Iterator[Proc]:
    """Stop ``proc`` on exit."""
    try:
        yield proc
    finally:
        proc.stop()


WEATHER_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather of a city",
    "parameters": [
        {"name": "city", "parameter_type": "string", "description": "City name", "required": True},
    ],
}


def create_agent(http: httpx.Client, **config: Any) -> str:
    """Create an agent on the scripted model; return its id."""
    body = {"model": "scripted-model", "instructions": "You are a test agent.", **config}
    response = http.post("/v1/agents", json={"agent_config": body})
    assert response.status_code == 200, response.text
    return str(response.json()["agent_id"])


def create_session(http: httpx.Client, agent_id: str, name: str = "test") -> str:
    """Create a session; return its id."""
    response = http.post(f"/v1/agents/{agent_id}/session", json={"session_name": name})
    assert response.status_code == 200, response.text
    return str(response.json()["session_id"])
