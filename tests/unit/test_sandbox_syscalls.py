"""Without a usable libseccomp the sandbox says so (and refuses to run code) instead of crashing."""

from __future__ import annotations

import ctypes.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferryman.sandbox import syscalls
from ferryman.sandbox.confinement import ConfinementUnavailable, launch
from ferryman.sandbox_settings import SandboxSettings

UNAVAILABLE = r"libseccomp is not available \(.*; Debian: apt-get install libseccomp2\)"


@pytest.fixture(params=["absent", "broken"])
def no_libseccomp(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """libseccomp not found, or found and not loadable (a stale cache entry, another architecture's build)."""
    broken = tmp_path / "libseccomp.so.2"
    broken.write_bytes(b"not a shared library")
    found = None if request.param == "absent" else str(broken)
    find_library = ctypes.util.find_library
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: found if name == "seccomp" else find_library(name))
    monkeypatch.delitem(sys.modules, "pyseccomp", raising=False)  # imported afresh, under the patch
    syscalls.program.cache_clear()
    yield
    syscalls.program.cache_clear()


@pytest.mark.usefixtures("no_libseccomp")
def test_the_filter_is_unavailable_with_the_reason() -> None:
    with pytest.raises(syscalls.FilterUnavailable, match=UNAVAILABLE):
        syscalls.program()


@pytest.mark.usefixtures("no_libseccomp")
def test_a_confined_kernel_cannot_be_launched_and_says_why(tmp_path: Path) -> None:
    with pytest.raises(ConfinementUnavailable, match=UNAVAILABLE):
        launch(SandboxSettings(dir=str(tmp_path)), tmp_path, None)
