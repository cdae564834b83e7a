"""What the sandboxed code can see of the server's process: not its environment, and no unbounded memory to fill.

The kernel is started both ways the server starts it: as root (a uid of its
own) and unprivileged (bubblewrap in a user namespace, where bubblewrap itself
is the sandbox's pid 1 under the same uid as the code).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ferryman.sandbox import Sandbox
from ferryman.sandbox.kernel import Kernel
from ferryman.sandbox_settings import SandboxSettings

pytestmark = pytest.mark.anyio

SECRET = "sk-the-servers-own-key"


@pytest.fixture()
def server_secret(monkeypatch: pytest.MonkeyPatch) -> str:
    """A credential in the server's environment, as an API key or a database URL would be."""
    monkeypatch.setenv("FERRYMAN_TEST_API_KEY", SECRET)
    return SECRET


def settings(tmp_path: Path, confinement: str = "bubblewrap") -> SandboxSettings:
    return SandboxSettings.model_validate(
        {"dir": str(tmp_path / "sandbox"), "confinement": confinement, "wall_seconds": 20, "memory_mb": 256}
    )


@pytest.fixture()
async def unprivileged(tmp_path: Path, server_secret: str) -> AsyncIterator[Kernel]:
    """A kernel started as a server not running as root starts it (no uid of its own)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    kernel = Kernel(settings(tmp_path), scratch, None)
    await kernel.start()
    yield kernel
    await kernel.close()


async def test_the_sandbox_pid_1_does_not_carry_the_servers_environment(unprivileged: Kernel) -> None:
    code = "import os\n[open(f'/proc/{p}/environ', 'rb').read() for p in os.listdir('/proc') if p.isdigit()]"
    execution = await unprivileged.execute(code)
    assert execution.error is None and execution.result is not None, execution
    assert "HOME=/work" in execution.result  # the listing read real environments, not nothing
    assert SECRET not in execution.result and "FERRYMAN_TEST_API_KEY" not in execution.result


async def test_the_sandbox_root_and_dev_are_not_writable_memory(unprivileged: Kernel) -> None:
    code = (
        "def attempt(path):\n"
        "    try:\n"
        "        open(path, 'wb').write(b'x')\n"
        "        return 'written'\n"
        "    except OSError as exc:\n"
        "        return type(exc).__name__\n"
        "[attempt(p) for p in ('/planted', '/dev/planted', '/dev/shm/planted')]"
    )
    execution = await unprivileged.execute(code)
    assert execution.error is None and execution.result is not None, execution
    assert "written" not in execution.result
    done = await unprivileged.execute("open('/tmp/t', 'w').write('ok') + open('/work/w', 'w').write('ok')")
    assert done.result == "4", done


async def test_the_root_kernel_does_not_see_the_servers_environment(tmp_path: Path, server_secret: str) -> None:
    box = Sandbox(settings(tmp_path))
    assert box.unavailable is None, box.unavailable
    try:
        outcome = await box.run("s", "import os\nsorted(os.environ)")
    finally:
        await box.close()
    assert outcome.execution.result is not None and "FERRYMAN_TEST_API_KEY" not in outcome.execution.result


async def test_unconfined_code_does_not_inherit_the_servers_environment(tmp_path: Path, server_secret: str) -> None:
    box = Sandbox(settings(tmp_path, confinement="off"))
    try:
        outcome = await box.run("s", "import os\n(os.environ.get('FERRYMAN_TEST_API_KEY'), os.getcwd())")
    finally:
        await box.close()
    assert outcome.execution.result == repr((None, str(tmp_path / "sandbox" / "s"))), outcome.execution


async def test_the_files_returned_by_one_call_are_bounded_together(tmp_path: Path) -> None:
    limits = settings(tmp_path).model_copy(update={"max_file_mb": 1})
    box = Sandbox(limits)
    code = "for name in 'abc':\n    open(f'/work/{name}.bin', 'wb').write(b'x' * 400_000)"
    try:
        outcome = await box.run("s", code)
    finally:
        await box.close()
    assert outcome.execution.error is None, outcome.execution
    assert [(f.path, len(f.data)) for f in outcome.files] == [("a.bin", 400_000), ("b.bin", 400_000)]


async def test_a_kernel_that_stops_reading_its_requests_is_killed_at_the_wall_clock(tmp_path: Path) -> None:
    box = Sandbox(settings(tmp_path).model_copy(update={"wall_seconds": 2}))
    hijack = (
        "import os, sys\n"
        "frame = sys._getframe()\n"
        "while 'requests' not in frame.f_locals:\n"
        "    frame = frame.f_back\n"
        "silent, keep = os.pipe()\n"
        "os.dup2(silent, frame.f_locals['requests'].fileno())"
    )
    try:
        assert (await box.run("s", hijack)).execution.error is None
        # More code than a pipe holds: writing it blocks while nothing reads the kernel's requests.
        stuck = await asyncio.wait_for(box.run("s", "x = 1\n" + "#" * 1_000_000), 30)
    finally:
        await box.close()
    assert stuck.execution.killed == "killed: time limit of 2 s reached (sandbox.wall_seconds)"
