"""Fixtures shared by every test folder: a scripted model server and a ferryman server."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from ferryman.testing import ScriptedServerClient
from support import Proc, ferryman_server, scripted_server


@pytest.fixture(scope="session")
def scripted_proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, str]]:
    """One scripted model server per test worker."""
    proc, root = scripted_server(tmp_path_factory.mktemp("scripted"))
    yield proc, root
    proc.stop()


@pytest.fixture()
def model(scripted_proc: tuple[Proc, str]) -> Iterator[ScriptedServerClient]:
    """The scripted model, emptied before each test."""
    client = ScriptedServerClient(scripted_proc[1])
    client.reset()
    yield client
    client.close()


@pytest.fixture(scope="session")
def server_proc(
    tmp_path_factory: pytest.TempPathFactory, scripted_proc: tuple[Proc, str]
) -> Iterator[tuple[Proc, str]]:
    """One ferryman server per test worker, on its own database."""
    tmp = tmp_path_factory.mktemp("ferryman")
    proc, base = ferryman_server(tmp, scripted_proc[1], tmp / "ferryman.db")
    yield proc, base
    proc.stop()


@pytest.fixture()
def base_url(server_proc: tuple[Proc, str], model: ScriptedServerClient) -> str:
    """Base URL of the shared ferryman server (the scripted model is reset for this test)."""
    return server_proc[1]


@pytest.fixture()
def http(base_url: str) -> Iterator[httpx.Client]:
    """An HTTP client on the shared ferryman server."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        yield client
