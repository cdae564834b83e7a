"""Run only by ``test_suite_isolation.py``, in a pytest of its own whose ``HOME`` is an empty directory.

Not collected by the suite (no ``test_`` prefix). Each test writes where ferryman writes by default
(uploaded files go to ``$FERRYMAN_HOME/files``): in a server process and in this one.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from ferryman.home import ferryman_home


def _upload(http: httpx.Client) -> None:
    upload = {"file": ("probe.txt", b"probe", "text/plain")}
    answer = http.post("/v1/files", files=upload, data={"purpose": "assistants"})
    assert answer.status_code == 200, answer.text


def test_a_server_process_writes_into_the_runs_ferryman_home(served_base_url: str) -> None:
    with httpx.Client(base_url=served_base_url, timeout=30) as http:
        _upload(http)
    assert (ferryman_home() / "files").is_dir()


def test_the_in_process_server_writes_into_the_runs_ferryman_home(http: httpx.Client) -> None:
    _upload(http)
    assert (ferryman_home() / "files").is_dir()
    assert not ferryman_home().is_relative_to(Path(os.environ["HOME"]))
