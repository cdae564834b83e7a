"""The sandbox beyond its namespaces: no user namespace inside, a bounded ``/tmp``, limits named, leftovers swept.

Run as root (as CI and most deployments run the server), the kernel is a uid of
the host in no user namespace of its own: the seccomp filter is what keeps it
from making one (and mounting a tmpfs of host memory there). The unprivileged
kernel is started as an unprivileged server starts it (``Kernel(..., uid=None)``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pyseccomp
import pytest

from ferryman.sandbox import Sandbox, SandboxUnavailable, claims, scratch
from ferryman.sandbox.kernel import Kernel
from ferryman.sandbox_settings import SandboxSettings

pytestmark = pytest.mark.anyio

AS_ROOT = os.geteuid() == 0
SESSION = "session-1"
TMP_LIMIT = "/tmp limit of 64 MB, 50 files reached (sandbox.max_file_mb, sandbox.max_tmp_files)"
FLOOD = "i = 0\nwhile True:\n    open(f'/tmp/{i}', 'w').close()\n    i += 1"
HOLD = (
    "import sys\n"
    "from pathlib import Path\n"
    "from ferryman.sandbox import claims\n"
    "claims.claim(Path(sys.argv[1]), sys.argv[2])\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()"
)
"""A server process holding a session's scratch space until its standard input closes."""


def settings(tmp_path: Path) -> SandboxSettings:
    return SandboxSettings(
        dir=str(tmp_path / "sandbox"), cpu_seconds=2, wall_seconds=10, memory_mb=256, max_processes=16, max_tmp_files=50
    )


@pytest.fixture()
async def sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    box = Sandbox(settings(tmp_path))
    assert box.unavailable is None, box.unavailable
    yield box
    await box.close()


async def result_of(box: Sandbox, code: str) -> str | None:
    execution = (await box.run(SESSION, code)).execution
    assert execution.killed is None and execution.error is None, execution
    return execution.result


async def error_of(box: Sandbox, code: str) -> str:
    execution = (await box.run(SESSION, code)).execution
    assert execution.killed is None and execution.error is not None, execution
    return execution.error


async def test_the_code_can_neither_create_a_user_namespace_nor_mount(sandbox: Sandbox) -> None:
    code = (
        "import ctypes, os, shutil, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def unshare():\n"
        "    try:\n"
        "        if hasattr(os, 'unshare'):  # Python 3.12 on\n"
        "            os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)\n"
        "            return 'created'\n"
        "    except OSError as exc:\n"
        "        return exc.errno\n"
        "    return 'created' if libc.unshare(0x10000000 | 0x20000) == 0 else ctypes.get_errno()\n"
        "def mount():\n"
        "    return 'mounted' if libc.mount(b'x', b'/work', b'tmpfs', 0, b'size=4g') == 0 else ctypes.get_errno()\n"
        "command = ['unshare', '-Urm', 'sh', '-c', 'mount -t tmpfs -o size=4g x /work && echo mounted']\n"
        "done = subprocess.run(command, capture_output=True, text=True) if shutil.which('unshare') else None\n"
        "unshare(), mount(), done and (done.returncode, done.stdout, done.stderr)"
    )
    outcome = await sandbox.run(SESSION, code)
    assert outcome.execution.error is None and outcome.execution.result is not None, outcome.execution
    created, mounted, command = eval(outcome.execution.result)  # noqa: S307 (a repr the test's own code made)
    assert (created, mounted) == (1, 1)  # EPERM, both
    assert command == (1, "", "unshare: unshare failed: Operation not permitted\n")


async def test_memory_the_address_space_limit_does_not_count_cannot_be_taken(sandbox: Sandbox) -> None:
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def anonymous_file():\n"
        "    try:\n"
        "        os.write(os.memfd_create('x'), b'x' * 1024)\n"
        "        return 'written'\n"
        "    except OSError as exc:\n"
        "        return exc.errno\n"
        "shared = libc.shmget(0, 64 * 1024 * 1024, 0o1000 | 0o600)\n"
        "anonymous_file(), shared if shared >= 0 else ctypes.get_errno()"
    )
    assert await result_of(sandbox, code) == "(1, 1)"  # EPERM, both
    error = await error_of(sandbox, "import socket\npairs = [socket.socketpair() for _ in range(1000)]")
    assert error.endswith("[sandbox] open file limit of 256 reached (sandbox.max_open_files)")


def calls(**numbers: str) -> str:
    """Code that makes raw system calls by name (numbers of this architecture), each giving (result, errno)."""
    resolved = {alias: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) for alias, name in numbers.items()}
    return (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        "def call(name, *args):\n"
        "    ctypes.set_errno(0)\n"
        "    return libc.syscall(NUMBERS[name], *args), ctypes.get_errno()\n"
        f"NUMBERS = {resolved!r}\n"
    )


async def test_no_key_one_session_stores_in_a_keyring_reaches_the_next_and_io_uring_is_refused(
    sandbox: Sandbox,
) -> None:
    """A root server gives the next session the uid the last one had; keyrings outlive its processes."""
    code = calls(add="add_key", request="request_key", uring="io_uring_setup")
    store = (
        "user, session = ctypes.c_int(-4), ctypes.c_int(-3)\n"
        "[call('add', b'user', b'ferryman-left', b'secret', 6, ring) for ring in (user, session)]"
    )
    assert await result_of(sandbox, code + store) == "[(-1, 1), (-1, 1)]"  # EPERM: nothing stored
    await sandbox.remove(SESSION)
    probe = "call('request', b'user', b'ferryman-left', None, ctypes.c_int(0)), call('uring', 4, bytes(120))"
    assert await result_of(sandbox, code + probe) == "((-1, 1), (-1, 1))"


@pytest.mark.skipif(not AS_ROOT, reason="only a root server mounts the kernel's /tmp itself")
async def test_a_file_flood_in_tmp_stops_at_its_limit_with_a_named_error(sandbox: Sandbox) -> None:
    error = await error_of(sandbox, FLOOD)
    assert "No space left on device" in error and error.endswith(f"\n[sandbox] {TMP_LIMIT}")
    # The kernel's own two output files are there too.
    assert (await sandbox.run(SESSION, "import os\nlen(os.listdir('/tmp'))")).execution.result == "50"


async def test_unprivileged_a_file_flood_in_tmp_kills_the_kernel_at_its_limit(tmp_path: Path) -> None:
    folder = tmp_path / "scratch"
    folder.mkdir()
    kernel = Kernel(settings(tmp_path), folder, None)
    await kernel.start()
    try:
        assert (await kernel.execute(FLOOD)).killed == f"killed: {TMP_LIMIT}"
    finally:
        await kernel.close()


@pytest.mark.skipif(not AS_ROOT, reason="only a root server gives each kernel a process limit of its own")
async def test_a_fork_bomb_is_told_the_process_limit(sandbox: Sandbox) -> None:
    error = await error_of(sandbox, "import os\nwhile True:\n    os.fork()")
    assert error.endswith(
        "BlockingIOError: [Errno 11] Resource temporarily unavailable\n"
        "[sandbox] process limit of 16 reached (sandbox.max_processes; threads count too)"
    )


async def test_network_errors_say_there_is_no_network(sandbox: Sandbox) -> None:
    refused = await error_of(sandbox, "import socket\nsocket.create_connection(('127.0.0.1', 5432))")
    assert refused.endswith(
        "ConnectionRefusedError: [Errno 111] Connection refused\n[sandbox] no network in the sandbox"
    )
    unresolved = await error_of(sandbox, "import urllib.request\nurllib.request.urlopen('http://example.com')")
    assert "URLError" in unresolved and unresolved.endswith("\n[sandbox] no network in the sandbox")


async def test_scratch_left_by_a_crashed_process_is_swept_at_start_and_a_live_ones_is_not(tmp_path: Path) -> None:
    limits = settings(tmp_path)
    root = limits.directory()
    root.mkdir()
    live = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLD, str(root), "live", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert live.stdout is not None and await live.stdout.readline() == b"held\n"
        crashed = await asyncio.create_subprocess_exec(
            sys.executable, "-c", HOLD, str(root), "crashed", stdin=asyncio.subprocess.DEVNULL
        )
        assert await crashed.wait() == 0  # it held its claim, then stopped without letting go of anything else
        for key in ("live", "crashed"):
            (root / key).mkdir()
            if AS_ROOT:
                scratch.mount(root / key, limits, 65534)
                scratch.mount_tmp(root / key, limits, 65534)
            (root / key / "data").write_text(key)

        box = Sandbox(limits)
        await box.close()

        assert sorted(os.listdir(root)) == (["live", "live.lock", "live.tmp"] if AS_ROOT else ["live", "live.lock"])
        assert (root / "live" / "data").read_text() == "live"
        assert (root / "live").is_mount() == AS_ROOT and (root / "live.tmp").is_mount() == AS_ROOT
    finally:
        assert live.stdin is not None
        live.stdin.close()
        await live.wait()
        removed = claims.sweep(root)  # once its process is gone
    assert removed == ["live"] and os.listdir(root) == []


async def test_a_kernel_started_while_its_session_is_removed_does_not_outlive_the_call(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleting a session does not wait for its call: the kernel that call was starting goes with it."""
    claiming, go_on = threading.Event(), threading.Event()
    kernels: list[Kernel] = []
    claim, start = claims.claim, Kernel.start

    def paused_claim(root: Path, key: str) -> int:  # in a worker thread, as the sandbox calls it
        claiming.set()
        go_on.wait()
        return claim(root, key)

    async def recorded_start(kernel: Kernel) -> None:
        kernels.append(kernel)
        await start(kernel)

    monkeypatch.setattr(claims, "claim", paused_claim)
    monkeypatch.setattr(Kernel, "start", recorded_start)
    call = asyncio.create_task(sandbox.run(SESSION, "1 + 1"))
    await asyncio.to_thread(claiming.wait)
    await sandbox.remove(SESSION)
    go_on.set()

    assert (await call).execution.result == "2"
    [kernel] = kernels
    assert not kernel.alive
    assert os.listdir(tmp_path / "sandbox") == []  # its scratch space, /tmp and claim went too


@pytest.mark.skipif(not AS_ROOT, reason="only a root server mounts the scratch space itself")
async def test_a_scratch_space_that_cannot_be_mounted_is_refused_without_the_servers_paths(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(path: Path, limits: SandboxSettings, uid: int) -> None:
        raise scratch.ScratchUnavailable(f"'mount' failed: mount: {scratch.tmp_dir(path)}: permission denied")

    monkeypatch.setattr(scratch, "mount_tmp", refused)
    with pytest.raises(SandboxUnavailable) as refusal:
        await sandbox.run(SESSION, "1")
    assert str(refusal.value) == "the session's scratch space could not be bounded (see the server's log)"
    assert str(tmp_path) not in str(refusal.value)
