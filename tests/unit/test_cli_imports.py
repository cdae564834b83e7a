"""The ``ferryman`` command answers at once: its help loads no command, a client command no server module."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SERVER_MODULES = (
    "ferryman.server", "ferryman.storage", "ferryman.engine", "ferryman.services", "ferryman.inference",
    "ferryman.config", "ferryman.auth", "ferryman.knowledge", "ferryman.tools", "ferryman.coordination",
    "ferryman.cli.serve", "ferryman.cli.keys", "ferryman.cli.models_pull", "ferryman.cli.arguments",
    "huggingface_hub", "numpy", "sqlalchemy", "starlette", "uvicorn", "openai", "mcp", "tokenizers", "yaml",
)  # fmt: skip
"""The server's packages and dependencies: none of them is the client commands' business."""
COMMAND_MODULES = ("ferryman.client", "ferryman.cli.agents", "ferryman.cli.remote", "rich", "httpx", "pydantic")
"""What the commands' modules load: ``ferryman --help`` needs none of it."""

SCRIPT = textwrap.dedent(
    """
    import contextlib, io, sys
    from ferryman.cli.main import main

    def loaded(roots):
        return sorted(name for name in sys.modules if any(name == r or name.startswith(r + ".") for r in roots))

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(list(argv))
            except SystemExit as exited:
                status = exited.code
        return status, out.getvalue() + err.getvalue()

    status, shown = run("--help")
    assert status == 0 and "agents" in shown, (status, shown)
    print("help loaded", loaded({commands!r}))
    status, shown = run("agents", "list", "--help")
    assert status == 0 and "--json" in shown, (status, shown)
    status, shown = run("agents", "list", "--url", "http://127.0.0.1:9")  # the discard port: nothing listens
    assert status == 2 and "cannot reach" in shown, (status, shown)
    status, shown = run("sessions", "list", "abc", "--url", "http://127.0.0.1:9", "--json")
    assert status == 2 and "cannot reach" in shown, (status, shown)
    print("client commands loaded", loaded({server!r}))
    """
)


def _run() -> list[str]:
    script = SCRIPT.format(commands=COMMAND_MODULES, server=SERVER_MODULES)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


def test_the_help_and_the_client_commands_load_no_server_module() -> None:
    help_line, client_line = _run()
    assert help_line == "help loaded []"
    assert client_line == "client commands loaded []"


def test_the_commands_tell_a_refused_connection_at_once() -> None:
    # The SDK repeats a request that could not connect (a server restarting), three tries with their waits;
    # a command says at once that nothing listens (test_client_transport: the policy's effect).
    from ferryman.cli import main, remote

    args = main.parser_for(["agents", "list"]).parse_args(["agents", "list", "--url", "http://127.0.0.1:9"])
    with remote.client_for(args) as client:
        assert client.options.retry.connect_failures is False
        assert client.options.retry.max_retries > 0  # a 429 or a 503 is still asked again
