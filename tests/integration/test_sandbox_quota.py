"""The scratch space's quota, hit for real: bytes and files bounded while the code writes, both ways the server runs.

Run as root, the server mounts a bounded tmpfs on each session's scratch
directory; unprivileged, bubblewrap mounts one as the sandbox's ``/work`` and the
file count is watched (the kernel started as ``Kernel(..., uid=None)``, as an
unprivileged server starts it).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ferryman.sandbox import Sandbox
from ferryman.sandbox import files as scratch_files
from ferryman.sandbox.kernel import Kernel
from ferryman.sandbox_settings import SandboxSettings

pytestmark = pytest.mark.anyio

SESSION = "session-1"
AS_ROOT = os.geteuid() == 0
QUOTA_MB = 100
SCRATCH_LIMIT = (
    f"scratch space limit of {QUOTA_MB} MB, {{files}} files in /work reached "
    "(sandbox.max_scratch_mb, sandbox.max_scratch_files)"
)
FILL = (
    "import os\n"
    "block = b'x' * (8 * 1024 * 1024)\n"
    "for i in range(64):\n"
    "    with open(f'part{i}.bin', 'wb') as f:\n"
    "        f.write(block)"
)


def settings(tmp_path: Path, **limits: int) -> SandboxSettings:
    return SandboxSettings(
        dir=str(tmp_path / "sandbox"),
        wall_seconds=30,
        cpu_seconds=5,
        memory_mb=256,
        max_file_mb=16,
        max_scratch_mb=limits.get("mb", QUOTA_MB),
        max_scratch_files=limits.get("files", 1000),
    )


@pytest.fixture()
async def sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    box = Sandbox(settings(tmp_path))
    assert box.unavailable is None, box.unavailable
    yield box
    await box.close()


@pytest.fixture()
async def unprivileged(tmp_path: Path) -> AsyncIterator[Kernel]:
    """A kernel whose ``/work`` is bubblewrap's own tmpfs (as an unprivileged server starts it)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    kernel = Kernel(settings(tmp_path, files=50), scratch, None)
    await kernel.start()
    yield kernel
    await kernel.close()


def bytes_under(root: scratch_files.Root) -> int:
    return sum(size for size, _ in scratch_files.snapshot(root).values())


async def test_filling_the_scratch_space_fails_in_the_code_and_the_session_goes_on(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    assert (await sandbox.run(SESSION, "kept = 'yes'")).execution.error is None
    outcome = await sandbox.run(SESSION, FILL)
    execution = outcome.execution
    assert execution.killed is None, execution
    assert execution.error is not None and "No space left on device" in execution.error
    assert f"[sandbox] {SCRATCH_LIMIT.format(files=1000)}" in execution.error
    scratch = tmp_path / "sandbox" / SESSION
    if AS_ROOT:  # the files are on a tmpfs mounted there, never on the host's disk
        assert scratch.is_mount() and os.stat(scratch).st_dev != os.stat(tmp_path).st_dev
        assert QUOTA_MB * 1024 * 1024 - 8 * 1024 * 1024 < bytes_under(scratch) <= QUOTA_MB * 1024 * 1024
    else:
        assert bytes_under(scratch) == 0
    after = await sandbox.run(
        SESSION, "import os\nfor name in os.listdir():\n    os.remove(name)\nopen('small.txt', 'w').write(kept)"
    )
    assert after.execution.error is None and after.execution.result == "3", after.execution
    assert not after.restarted and [(f.path, f.data) for f in after.files] == [("small.txt", b"yes")]
    await sandbox.remove(SESSION)
    assert not scratch.exists()


@pytest.mark.skipif(not AS_ROOT, reason="the server mounts the scratch space only as root")
async def test_as_root_the_file_count_is_bounded_by_the_mount(tmp_path: Path) -> None:
    box = Sandbox(settings(tmp_path, files=50))
    code = "import os\nos.mkdir('d')\nfor i in range(200):\n    open(f'd/{i}', 'w').close()"
    try:
        outcome = await box.run(SESSION, code)
        assert outcome.execution.killed is None and outcome.execution.error is not None, outcome.execution
        assert "No space left on device" in outcome.execution.error and "50 files" in outcome.execution.error
        assert len(os.listdir(tmp_path / "sandbox" / SESSION / "d")) == 49  # and the directory itself
        assert (await box.run(SESSION, "import shutil\nshutil.rmtree('d')\n6 * 7")).execution.result == "42"
    finally:
        await box.close()
    assert not (tmp_path / "sandbox" / SESSION).is_mount()


async def test_unprivileged_the_bytes_are_bounded_and_the_files_read_through_the_sandbox(unprivileged: Kernel) -> None:
    root = unprivileged.files_root
    assert isinstance(root, int)
    execution = await unprivileged.execute(FILL)
    assert execution.killed is None and execution.error is not None, execution
    assert "No space left on device" in execution.error
    assert QUOTA_MB * 1024 * 1024 - 8 * 1024 * 1024 < bytes_under(root) <= QUOTA_MB * 1024 * 1024
    assert scratch_files.read_file(root, "part0.bin", 16 * 1024 * 1024) == b"x" * (8 * 1024 * 1024)
    done = await unprivileged.execute("import os\nfor name in os.listdir():\n    os.remove(name)\n6 * 7")
    assert done.result == "42" and bytes_under(root) == 0, done


async def test_unprivileged_too_many_files_kill_the_kernel(unprivileged: Kernel) -> None:
    quick = await unprivileged.execute("for i in range(60):\n    open(f'{i}', 'w').close()")
    assert quick.killed == f"killed: {SCRATCH_LIMIT.format(files=50)}"
    assert not unprivileged.alive


async def test_unprivileged_files_created_without_end_are_stopped_during_the_call(unprivileged: Kernel) -> None:
    endless = await unprivileged.execute("i = 0\nwhile True:\n    open(f'{i}', 'w').close()\n    i += 1")
    assert endless.killed == f"killed: {SCRATCH_LIMIT.format(files=50)}"
    root = unprivileged.files_root
    assert isinstance(root, int) and 50 < len(scratch_files.snapshot(root))  # still readable until close()
