"""The tests write only into temporary directories: never into ``~/.ferryman``, the home directory or the tree.

``tests/conftest.py`` points ``FERRYMAN_HOME``, ``HF_HOME`` and Hypothesis's directory at one made for the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ferryman.home import ferryman_home

ROOT = Path(__file__).parents[2]
PROBE = Path(__file__).with_name("isolation_probe.py")
ISOLATED = ("FERRYMAN_HOME", "HF_HOME", "HYPOTHESIS_STORAGE_DIRECTORY")
"""What tests/conftest.py sets for the run (else: ~/.ferryman, ~/.cache/huggingface, ./.hypothesis)."""


def test_ferryman_home_and_the_caches_point_into_a_temporary_directory() -> None:
    temporary = Path(tempfile.gettempdir()).resolve()
    for name in ISOLATED:
        assert Path(os.environ[name]).resolve().is_relative_to(temporary), name
    assert ferryman_home().resolve().is_relative_to(temporary)
    assert not ferryman_home().resolve().is_relative_to(Path.home().resolve())


def test_a_run_that_starts_servers_writes_nothing_under_home(tmp_path: Path) -> None:
    """A pytest of its own, ``HOME`` an empty directory and none of the variables set: nothing appears in it."""
    home = tmp_path / "home"
    home.mkdir()
    inherited = (*ISOLATED, "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")
    env = {k: v for k, v in os.environ.items() if k not in inherited and not k.startswith("PYTEST_XDIST")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(PROBE), "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "base")],
        cwd=ROOT,
        env={**env, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout, run.stdout
    assert sorted(str(path.relative_to(home)) for path in home.rglob("*")) == []
