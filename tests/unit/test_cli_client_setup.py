"""What the ``ferryman`` command loads, and how long its client waits."""

from __future__ import annotations

import subprocess
import sys

import httpx

from ferryman.cli import main as cli
from ferryman.cli import remote
from ferryman.cli.chat import READ_TIMEOUT as CHAT_READ_TIMEOUT

CLIENT_MODULES = ("ferryman.client", "ferryman.cli.remote", "ferryman.cli.chat", "ferryman.cli.agents")


def test_serve_loads_none_of_the_client_commands() -> None:
    script = (
        "import sys\n"
        "from ferryman.cli.main import parser_for\n"
        "parser_for(['serve', '--port', '9']).parse_args(['serve', '--port', '9'])\n"
        f"print(sorted(m for m in sys.modules if m.startswith({CLIENT_MODULES!r})))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_every_command_is_in_the_whole_help() -> None:
    usage = cli.parser_for().format_usage()
    for command in ("serve", "keys", "chat", "agents", "sessions", "turns", "models", "files", "vector-stores"):
        assert command in usage


def _timeout(*argv: str) -> httpx.Timeout:
    with remote.client_for(cli.parser_for(argv).parse_args(argv)) as client:
        timeout = client.options.timeout
    assert isinstance(timeout, httpx.Timeout)
    return timeout


def test_chat_waits_long_for_a_first_token_but_not_to_connect() -> None:
    chat = _timeout("chat", "Hi")
    assert (chat.read, chat.connect) == (CHAT_READ_TIMEOUT, remote.CONNECT_TIMEOUT)
    assert CHAT_READ_TIMEOUT >= 600 and remote.CONNECT_TIMEOUT <= 10
    listing = _timeout("agents", "list")
    assert (listing.read, listing.connect) == (remote.READ_TIMEOUT, remote.CONNECT_TIMEOUT)
