"""``ferryman serve`` refuses clearly when it has no way to answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ferryman.cli import main as cli


def test_serve_without_provider_or_embedded_model_exits_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "embedded_available", lambda runtime: (False, "llama-cpp-python is not installed"))
    assert cli.main(["serve", "--db", str(tmp_path / "x.db")]) == 2
    message = capsys.readouterr().err
    assert "-e '.[local]'" in message and "--inference-url" in message
    assert "llama-cpp-python is not installed" in message


def _uvicorn_options(monkeypatch: pytest.MonkeyPatch, *argv: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(cli.uvicorn, "run", lambda app, **options: seen.update(options))
    assert cli.main(["serve", "--inference-url", "http://127.0.0.1:9/v1", *argv]) == 0
    return seen


def test_idle_connections_outlive_client_pools_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = _uvicorn_options(monkeypatch, "--db", str(tmp_path / "x.db"))
    assert options["timeout_keep_alive"] == 65


def test_keep_alive_comes_from_the_flag_or_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "ferryman.yaml"
    config.write_text("server:\n  keep_alive: 90\n")
    db = str(tmp_path / "x.db")
    assert _uvicorn_options(monkeypatch, "--db", db, "--config", str(config))["timeout_keep_alive"] == 90
    assert _uvicorn_options(monkeypatch, "--db", db, "--keep-alive", "30")["timeout_keep_alive"] == 30


def test_every_worker_gets_the_keep_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ("--workers", "2", "--db", "postgresql://u@127.0.0.1:1/x", "--redis", "redis://127.0.0.1:1/0")
    options = _uvicorn_options(monkeypatch, *argv, "--keep-alive", "70")
    assert (options["workers"], options["timeout_keep_alive"]) == (2, 70)


_HIDE = "import sys\nfor _name in {modules!r}:\n    sys.modules[_name] = None\n"


@pytest.mark.parametrize(
    ("hidden", "argv", "extra"),
    [
        (["asyncpg"], ["--db", "postgresql://u@127.0.0.1:1/x"], "postgres"),
        (["asyncpg"], ["--db", "postgresql://u@127.0.0.1:1/x", "--redis", "redis://127.0.0.1:1/0", "--workers", "2"],
         "postgres"),
        (["redis"], ["--db", "redis://127.0.0.1:1/0"], "redis"),
        (["redis"], ["--db", "postgresql://u@127.0.0.1:1/x", "--redis", "redis://127.0.0.1:1/0"], "redis"),
        (["llama_cpp", "xllamacpp"], [], "local"),
    ],
)  # fmt: skip
def test_a_missing_extra_is_one_line_naming_it_and_exit_code_2(
    tmp_path: Path, hidden: list[str], argv: list[str], extra: str
) -> None:
    (tmp_path / "sitecustomize.py").write_text(_HIDE.format(modules=hidden))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    if extra != "local":
        argv = [*argv, "--inference-url", "http://127.0.0.1:9/v1"]
    command = [sys.executable, "-m", "ferryman.cli.main", "serve", "--port", "9", *argv]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.strip()]
    assert f".[{extra}]" in line and line.startswith("ferryman: ")
