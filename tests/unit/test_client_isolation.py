"""``ferryman.client`` imports without any of the server's dependencies, and its optional ones only when used."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# The server's own packages, and ferryman's layers beyond the wire models.
FORBIDDEN = (
    "starlette", "sse_starlette", "uvicorn", "sqlalchemy", "alembic", "asyncpg", "redis", "openai", "mcp",
    "numpy", "tokenizers", "jwt", "limits", "yaml", "multipart",
    "ferryman.server", "ferryman.storage", "ferryman.engine", "ferryman.services", "ferryman.config",
    "ferryman.auth", "ferryman.inference", "ferryman.knowledge", "ferryman.tools", "ferryman.testing",
    "ferryman.cli",
)  # fmt: skip
LAZY = ("rich", "docstring_parser")
"""Imported by ``EventLogger`` and ``ClientTool`` when first used, never by ``import ferryman.client``."""

SCRIPT = textwrap.dedent(
    """
    import sys

    FORBIDDEN = {forbidden!r}
    LAZY = {lazy!r}

    def under(name, roots):
        return any(name == root or name.startswith(root + ".") for root in roots)

    class Forbid:
        # httpx tries rich for its own command line and does without: a refusal is no failure there.
        def find_spec(self, name, path=None, target=None):
            if under(name, FORBIDDEN + LAZY):
                raise ImportError(f"ferryman.client imported {{name}}")
            return None

    forbid = Forbid()
    sys.meta_path.insert(0, forbid)
    import ferryman.client
    from ferryman.client import AsyncClient, Client, NotFoundError, SyncPage
    import ferryman.client.events
    missing = [name for name in ferryman.client.__all__ if not hasattr(ferryman.client, name)]
    assert not missing, missing
    Client(base_url="http://x").close()
    loaded = sorted(name for name in sys.modules if under(name, LAZY))
    assert not loaded, loaded

    sys.meta_path.remove(forbid)
    from ferryman.client import EventLogger, client_tool

    def greet(name: str) -> str:
        '''Greet someone.

        Args:
            name: Who.
        '''
        return name

    assert client_tool(greet).input_schema["properties"]["name"]["description"] == "Who."
    EventLogger()
    assert all(root in sys.modules for root in LAZY)
    print("ok", len(ferryman.client.__all__))
    """
)


def test_the_client_imports_without_the_servers_dependencies() -> None:
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(forbidden=FORBIDDEN, lazy=LAZY)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok")


def test_the_wire_models_import_nothing_else_of_ferrymans() -> None:
    script = SCRIPT.format(forbidden=FORBIDDEN, lazy=LAZY).replace(
        "import ferryman.client\n", "import ferryman.api.agents\n"
    )
    run = subprocess.run([sys.executable, "-c", script.split("from ferryman.client")[0]], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert run.returncode == 0, run.stderr
