"""What every ``ferryman`` command shares: ``--json``, documented exit statuses, a quiet end on a closed pipe
or Ctrl-C, ids by prefix; ``keys`` with and without keys; ``stop`` signalling only the server it started."""

from __future__ import annotations

import argparse
import errno
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ferryman.cli import exits, ids, pidfile, serve
from ferryman.cli import main as cli
from ferryman.cli.remote import UsageError
from ferryman.inference.pulled import PulledModel, PulledModels


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every runnable command of ``parser`` (``("agents", "list")``…), with its parser's options."""
    groups = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not groups:
        yield path
        return
    for name, child in groups[0].choices.items():
        yield from _leaves(child, (*path, name))


def _parser_of(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = cli.parser_for(every=True)
    for name in path:
        group = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = group.choices[name]
    return parser


def test_every_command_takes_json() -> None:
    commands = list(_leaves(cli.parser_for(every=True)))
    assert ("keys", "list") in commands and ("stop",) in commands and ("serve",) in commands
    lacking = [" ".join(path) for path in commands if "--json" not in _parser_of(path)._option_string_actions]
    assert lacking == []


def test_the_exit_statuses_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert "exit status:" in shown
    for code in (exits.EXIT_OK, exits.EXIT_API_ERROR, exits.EXIT_USAGE, exits.EXIT_INTERRUPTED, exits.EXIT_CLOSED_PIPE):
        assert f"\n  {code} " in shown
    assert "unique prefix" in shown


class _ClosedPipe(io.StringIO):
    """A stdout whose reader has gone (``| head`` that has read its line)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


@pytest.mark.parametrize("argv", [["models", "pulled", "--json"], ["keys", "list", "--json"], ["stop", "--json"]])
def test_a_closed_stdout_ends_quietly_with_141(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    monkeypatch.setenv("FERRYMAN_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    extra = ["--db", str(tmp_path / "k.db")] if argv[0] == "keys" else []
    assert cli.main([*argv, *extra]) == exits.EXIT_CLOSED_PIPE
    assert capsys.readouterr().err == ""


def test_json_into_a_closed_pipe_ends_quietly_in_a_real_process(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "ferryman.cli.main", "models", "pulled", "--json"]
    env = {**os.environ, "FERRYMAN_HOME": str(tmp_path)}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader is gone before the first byte is written
        errors = process.stderr.read().decode()
        status = process.wait(timeout=60)
    assert (status, errors) == (exits.EXIT_CLOSED_PIPE, "")


def test_a_table_into_a_closed_pipe_ends_quietly_with_141_in_a_real_process(tmp_path: Path) -> None:
    # Rich handles a closed stdout itself, exiting 1 (an error's status): the commands' console must not.
    PulledModels(tmp_path / "models").add(
        PulledModel(
            name="tiny", repo_id="owner/repo", filename="tiny.gguf", commit="c" * 40, sha256="s" * 64, size=3,
            path="owner/repo/tiny.gguf", pulled_at=0,
        )
    )  # fmt: skip
    command = [sys.executable, "-m", "ferryman.cli.main", "models", "pulled"]
    env = {**os.environ, "FERRYMAN_HOME": str(tmp_path)}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        errors = process.stderr.read().decode()
        status = process.wait(timeout=60)
    assert (status, errors) == (exits.EXIT_CLOSED_PIPE, "")


def test_ctrl_c_ends_quietly_with_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(serve, "serve_command", interrupted)
    assert cli.main(["serve"]) == exits.EXIT_INTERRUPTED
    assert capsys.readouterr().err == "interrupted\n"


def test_keys_say_when_there_are_none_and_print_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--db", str(tmp_path / "keys.db")]
    assert cli.main(["keys", "list", *db]) == 0
    empty = capsys.readouterr()
    assert empty.out == "" and empty.err.startswith("no API keys")
    assert cli.main(["keys", "list", *db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []

    assert cli.main(["keys", "create", "--name", "bot", "--role", "admin", *db, "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["name"] == "bot" and created["key"].startswith("fm_") and created["grants"] == {"roles": ["admin"]}
    assert cli.main(["keys", "list", *db, "--json"]) == 0
    listed = capsys.readouterr().out
    [key] = json.loads(listed)
    assert (key["name"], key["grants"], key["revoked_at"]) == ("bot", {"roles": ["admin"]}, None)
    assert created["key"] not in listed
    assert cli.main(["keys", "revoke", "bot", *db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"name": "bot", "revoked": True}


def test_serve_json_goes_with_detach(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--json", "--inference-url", "http://127.0.0.1:9/v1"]) == exits.EXIT_USAGE
    [line] = capsys.readouterr().err.splitlines()
    assert line == "ferryman: --json goes with --detach (a server in the foreground prints its log)"


def test_the_detached_server_gets_the_same_flags_but_detach_pull_and_json() -> None:
    argv = [
        "serve", "--port", "9000", "--db", "x.db", "--inference-url", "http://a:1/v1", "--inference-url",
        "http://b:2/v1", "--insecure-no-auth", "--keep-alive", "70", "--log-level", "warning", "--model",
        "owner/name/file.gguf", "--detach", "--pull", "--json",
    ]  # fmt: skip
    given = cli.parser_for(argv).parse_args(argv)
    flags = serve._detached_arguments(given, "file")
    assert not {"--detach", "--pull", "--json"} & set(flags)
    again = vars(cli.parser_for(["serve", *flags]).parse_args(["serve", *flags]))
    expected = vars(given) | {"model": "file", "detach": False, "pull": False, "json": False}
    assert again == expected


def test_an_id_is_found_by_its_unique_prefix() -> None:
    known = ["5d89a91e-0000-4000-8000-000000000001", "5d77aaaa-0000-4000-8000-000000000002", "e5624884-0000"]
    assert ids.unique("agent", "5d89", known) == known[0]
    assert ids.unique("agent", known[1], known) == known[1]
    assert ids.unique("agent", "nope", known) == "nope"  # the server says it is not found
    with pytest.raises(UsageError, match=r"^agent id prefix '5d' is ambiguous: 2 agents begin with it \(5d77"):
        ids.unique("agent", "5d", known)
    assert ids.unique("agent", "5d", ["5d", "5d1"]) == "5d"  # a whole id wins over those it begins
    assert ids.complete(known[0]) and ids.complete("file-" + "a" * 32) and ids.complete("vs_" + "0" * 32)
    assert not ids.complete("5d89a91e") and not ids.complete("my-store")


_SERVER = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)
_STUBBORN = _SERVER.replace("lambda *_: sys.exit(0)", "signal.SIG_IGN")


@contextmanager
def _process(code: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process running ``code``, once it has set its SIGTERM handler; killed on exit."""
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        try:
            assert process.stdout.readline() == b"ready\n"
            yield process
        finally:
            process.kill()
            process.wait()


def _recorded(process: subprocess.Popen[bytes], **changes: str) -> pidfile.Detached:
    fields = {
        "started": pidfile.start_time(process.pid) or "",
        "command": pidfile.command_line(process.pid) or "",
        "url": "http://127.0.0.1:9",
        "log": "server.log",
    }
    return pidfile.Detached(pid=process.pid, **(fields | changes))


def test_stop_ends_the_recorded_server_and_removes_its_pidfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FERRYMAN_HOME", str(tmp_path))
    with _process(_SERVER) as server:
        pidfile.write(_recorded(server))
        assert cli.main(["stop", "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"stopped": True, "pid": server.pid, "url": "http://127.0.0.1:9"}
        assert server.wait(timeout=10) == 0  # it ended on SIGTERM (not killed)
        assert not (tmp_path / "server.pid").exists()
        assert cli.main(["stop"]) == 0
        assert capsys.readouterr().out.startswith("no server started with 'ferryman serve --detach' is running")


@pytest.mark.parametrize("changed", ["started", "command"])
def test_stop_never_signals_a_process_the_pid_now_belongs_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], changed: str
) -> None:
    monkeypatch.setenv("FERRYMAN_HOME", str(tmp_path))
    with _process(_SERVER) as other:
        pidfile.write(_recorded(other, **{changed: "something else"}))
        assert cli.main(["stop"]) == 0
        assert f"(pid {other.pid} is another process now): removed its pidfile" in capsys.readouterr().out
        assert other.poll() is None  # never signalled
        assert not (tmp_path / "server.pid").exists()


def test_stop_says_when_the_server_does_not_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FERRYMAN_HOME", str(tmp_path))
    with _process(_STUBBORN) as stubborn:
        pidfile.write(_recorded(stubborn))
        assert cli.main(["stop", "--timeout", "0.5"]) == exits.EXIT_API_ERROR
        [line] = capsys.readouterr().err.splitlines()
        assert f"(pid {stubborn.pid}) is still running 0.5 s after SIGTERM" in line
        assert stubborn.poll() is None and (tmp_path / "server.pid").exists()
