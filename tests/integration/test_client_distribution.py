"""``pip install ./client`` alone: the SDK and the client's commands work with none of the server's dependencies.

Offline: the wheel is built here (hatchling is in the ``dev`` extra; no build isolation), then
installed into a fresh virtual environment (no system site-packages) that holds only what
ferryman-client's metadata requires, linked from this environment's installed distributions.
A module the client imports without declaring its distribution fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER_ONLY = ("ferryman.server", "ferryman.storage", "ferryman.config", "sqlalchemy", "starlette", "numpy", "mcp")

pytestmark = pytest.mark.integration


def _requirements(name: str, seen: set[str]) -> None:
    """Add ``name`` and every distribution it requires (those its markers select here) to ``seen``."""
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return
    seen.add(key)
    for requirement in metadata.requires(name) or []:
        spec, _, marker = requirement.partition(";")
        if "extra" in marker or (marker.strip() and not _applies(marker)):
            continue
        _requirements(re.split(r"[\s\[<>=!~(]", spec.strip(), maxsplit=1)[0], seen)


def _applies(marker: str) -> bool:
    """Whether an environment marker (``python_version < "3.12"``…) holds here, as pip would judge it."""
    from packaging.markers import Marker  # noqa: PLC0415 - pip's own marker grammar, only this test needs it

    return Marker(marker).evaluate()


def _link_distribution(name: str, site: Path) -> None:
    """Make distribution ``name`` (as installed here) importable in ``site``: its top-level files, linked."""
    dist = metadata.distribution(name)
    tops = {Path(str(file)).parts[0] for file in dist.files or [] if not str(file).startswith("..")}
    base = Path(str(dist.locate_file("")))
    for top in tops:
        target = site / top
        if not target.exists() and (base / top).exists():
            target.symlink_to(base / top)


def _isolated_env(tmp: Path) -> Path:
    """A fresh environment with the client's wheel installed and its dependencies only; its ``bin``."""
    wheels = tmp / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", str(wheels), str(ROOT / "client")],
        check=True, timeout=120, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip
    env_dir = tmp / "env"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.strip()
    )  # fmt: skip
    needed: set[str] = set()
    for requirement in metadata.requires("ferryman-client") or []:
        _requirements(re.split(r"[\s\[<>=!~(;]", requirement, maxsplit=1)[0], needed)
    for name in needed:
        _link_distribution(name, site)
    (wheel,) = wheels.glob("ferryman_client-*.whl")
    subprocess.run(
        [python, "-m", "pip", "install", "--no-index", "--no-deps", "-q", str(wheel)],
        check=True, timeout=120, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip
    return env_dir / "bin"


@pytest.fixture(scope="module")
def client_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _isolated_env(tmp_path_factory.mktemp("client-only"))


def _run(command: list[str | Path], home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "FERRYMAN_HOME": str(home / ".ferryman")}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)


def test_the_sdk_imports_with_the_clients_dependencies_only(client_only: Path, tmp_path: Path) -> None:
    script = (
        "import importlib.util\n"
        "from ferryman.client import Agent, AsyncAgent, Client, client_tool\n"
        f"print([m for m in {SERVER_ONLY!r} if importlib.util.find_spec(m.split('.')[0]) and "
        "importlib.util.find_spec(m)])\n"
    )
    run = _run([client_only / "python", "-c", script], tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"  # none of the server's code or dependencies is there to import
    check = _run([client_only / "python", "-m", "pip", "check"], tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_command_has_the_client_commands_and_no_server_ones(client_only: Path, tmp_path: Path) -> None:
    shown = _run([client_only / "ferryman", "--help"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "agents" in shown.stdout and "chat" in shown.stdout
    assert not re.search(r"\b(serve|keys|stop)\b", shown.stdout.split("options:")[0])
    listing = _run([client_only / "ferryman", "agents", "list", "--url", "http://127.0.0.1:9"], tmp_path)
    assert listing.returncode == 2
    assert "cannot reach http://127.0.0.1:9" in listing.stderr
    serve = _run([client_only / "ferryman", "serve"], tmp_path)
    assert serve.returncode == 2 and "invalid choice: 'serve'" in serve.stderr
