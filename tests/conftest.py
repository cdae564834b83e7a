"""Fixtures shared by every test folder.

Route behaviour runs in this process: ``http`` is a ``TestClient`` on one
ferryman app per test worker, ``model`` the script its model answers from.
Real processes (``scripted_proc``, ``server_proc``, ``served_model``) are for
the tests where a process matters: restarts, kills, replicas, workers, real sockets.
Either model fails the test at teardown if a scripted reply was left unused
(unless the test is marked ``leaves_replies``) or a call found nothing scripted.

Nothing a test runs writes outside temporary directories: ``pytest_configure``
points ``FERRYMAN_HOME`` (else ``~/.ferryman``), the Hugging Face cache and
Hypothesis's directory (else ``./.hypothesis``) at one made for the run, which
this process and every process it starts (xdist workers, servers) inherit.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ferryman.testing import ScriptedServerClient
from inprocess import AskedModel, Served, check_script, served
from mcp_servers import mcp_http_server, mcp_sse_server  # noqa: F401  (fixtures)
from support import LAUNCHED, Proc, ferryman_server, scripted_server

ISOLATED = {"FERRYMAN_HOME": "ferryman", "HF_HOME": "huggingface", "HYPOTHESIS_STORAGE_DIRECTORY": "hypothesis"}
"""What would write under the home directory or the working tree, and the folder of the run's directory it gets."""
_made: list[Path] = []
_LOG_TAIL = 6000
"""Characters of each process's log that a failed test's report shows, at most (the last ones)."""
_log_sizes = pytest.StashKey[dict[Path, int]]()


def pytest_configure(config: pytest.Config) -> None:
    """Point the variables of ``ISOLATED`` into a directory made for this run, before anything is collected."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: started by its controller, after this ran there, with its environment
    run_home = Path(tempfile.mkdtemp(prefix="ferryman-tests-"))
    _made.append(run_home)
    for name, folder in ISOLATED.items():
        os.environ[name] = str(run_home / folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the directory this process made (workers made none)."""
    while _made:
        shutil.rmtree(_made.pop(), ignore_errors=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Note how long each launched process's log is as the test starts."""
    item.stash[_log_sizes] = {proc.log: _size(proc.log) for proc in LAUNCHED}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """A failed test's report shows what the logs of the processes it used (servers, replicas) gained meanwhile:
    a server's 500 says why there only."""
    report: pytest.TestReport = yield
    if report.failed:
        before = item.stash.get(_log_sizes, {})
        for log in dict.fromkeys(proc.log for proc in LAUNCHED):
            gained = _read_from(log, before.get(log, 0))
            if gained.strip():
                report.sections.append((f"{report.when}: {log.name}, the end of what it logged", gained[-_LOG_TAIL:]))
    return report


def _size(log: Path) -> int:
    try:
        return log.stat().st_size
    except OSError:
        return 0


def _read_from(log: Path, offset: int) -> str:
    """What ``log`` holds past ``offset``, its last bytes only (a report shows the end)."""
    try:
        with log.open("rb") as file:
            file.seek(max(offset, _size(log) - 4 * _LOG_TAIL))
            return file.read().decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture(scope="session")
def inprocess_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One in-process ferryman per test worker, on its own database."""
    with served(tmp_path_factory.mktemp("inprocess") / "ferryman.db") as server:
        yield server


@pytest.fixture()
def model(inprocess_server: Served, request: pytest.FixtureRequest) -> Iterator[Served]:
    """The in-process server's scripted model, emptied before each test and checked after it."""
    inprocess_server.reset()
    yield inprocess_server
    check_script(request, inprocess_server.script)


@pytest.fixture()
def http(model: Served) -> httpx.Client:
    """The client of the in-process server (the scripted model is reset for this test)."""
    return model.http


@pytest.fixture()
def scripted(request: pytest.FixtureRequest) -> Iterator[AskedModel]:
    """A fresh scripted model, checked at teardown (no reply left unused, no call unscripted); its ``asked``
    is set once it is called."""
    model = AskedModel()
    yield model
    check_script(request, model.script)


@pytest.fixture()
def anyio_backend() -> str:
    """Async tests run on asyncio (the server's loop), not on every backend anyio knows."""
    return "asyncio"


@pytest.fixture(scope="session")
def scripted_proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, str]]:
    """One scripted model server process per test worker."""
    proc, root = scripted_server(tmp_path_factory.mktemp("scripted"))
    yield proc, root
    proc.stop()


@pytest.fixture()
def served_model(scripted_proc: tuple[Proc, str], request: pytest.FixtureRequest) -> Iterator[ScriptedServerClient]:
    """The scripted model server, emptied before each test and checked after it."""
    client = ScriptedServerClient(scripted_proc[1])
    client.reset()
    yield client
    try:
        client.check(allow_unused=request.node.get_closest_marker("leaves_replies") is not None)
    finally:
        client.close()


@pytest.fixture(scope="session")
def server_proc(
    tmp_path_factory: pytest.TempPathFactory, scripted_proc: tuple[Proc, str]
) -> Iterator[tuple[Proc, str]]:
    """One ferryman server process per test worker, on its own database."""
    tmp = tmp_path_factory.mktemp("ferryman")
    proc, base = ferryman_server(tmp, scripted_proc[1], tmp / "ferryman.db")
    yield proc, base
    proc.stop()


@pytest.fixture()
def served_base_url(server_proc: tuple[Proc, str], served_model: ScriptedServerClient) -> str:
    """Base URL of the ferryman server process (its scripted model is reset for this test)."""
    return server_proc[1]
