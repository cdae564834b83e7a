"""How a kernel is started: bubblewrap's namespaces around the interpreter, rlimits set by ``prlimit``.

The sandbox sees the interpreter's runtime read-only, a fresh ``/proc``, a
minimal ``/dev``, a small private ``/tmp`` and its session's bounded scratch
space as ``/work`` (see :mod:`.scratch`); nothing else of the host (no network, no server database,
config or ``FERRYMAN_HOME``). The limits are set by util-linux ``prlimit`` before
``bwrap`` is executed (no Python ``preexec_fn``: the server has threads). A
seccomp filter keeps the code from creating user namespaces (see :mod:`.syscalls`).

Nothing of the server's environment is passed on, not even to ``bwrap``: unprivileged,
bubblewrap is the sandbox's pid 1 under the code's own uid, and its
``/proc/1/environ`` would show the server's credentials to the code.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ferryman.sandbox_settings import SandboxSettings

from . import scratch as scratch_space
from . import syscalls
from .scratch import SCRATCH, TMP, ScratchUnavailable

log = logging.getLogger(__name__)

KERNEL_SOURCE = (Path(__file__).with_name("kernel_main.py")).read_text(encoding="utf-8")
_SANDBOX_ID = "65534"
_CLONE_NEWUSER = 0x10000000
_SELF_TEST_SECONDS = 20.0
_MB = 1024 * 1024


class ConfinementUnavailable(Exception):
    """This host cannot confine code (no bubblewrap, or it failed its self-test)."""


@dataclass(frozen=True)
class Launch:
    """What to execute for one kernel.

    Attributes:
        argv: The command line.
        env: Its whole environment (none of the server's, which holds credentials).
        cwd: The working directory (unconfined only: the scratch directory's path).
        pass_fds: Descriptors the command inherits (bubblewrap's ``--info-fd`` and ``--seccomp``).
        owned_fds: Those of them made for this launch, for the caller to close once the command started.
    """

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    pass_fds: tuple[int, ...] = ()
    owned_fds: tuple[int, ...] = ()

    def close_owned(self) -> None:
        """Close the descriptors made for this launch (the started command has its own copies)."""
        for fd in self.owned_fds:
            os.close(fd)


def launch_env(home: str) -> dict[str, str]:
    """The environment a kernel (and ``prlimit`` and ``bwrap`` before it) starts with."""
    return {
        "PATH": os.environ.get("PATH") or os.defpath,
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def limits_prefix(settings: SandboxSettings, count_processes: bool) -> list[str]:
    """The ``prlimit`` command that sets the kernel's rlimits, then executes the rest."""
    prlimit = shutil.which("prlimit") or "prlimit"
    args = [
        prlimit,
        f"--as={settings.memory_mb * _MB}",
        f"--cpu={settings.kernel_cpu_seconds}:{settings.kernel_cpu_seconds}",
        f"--fsize={settings.max_file_mb * _MB}",
        f"--nofile={settings.max_open_files}",
        "--core=0",
    ]
    if count_processes:
        args.append(f"--nproc={settings.max_processes}")
    return [*args, "--"]


def kernel_argv(settings: SandboxSettings, count_processes: bool) -> list[str]:
    """The interpreter running the kernel, isolated from the environment and user site."""
    processes = settings.max_processes if count_processes else 0
    limits = (settings.cpu_seconds, settings.output_chars, processes)
    return [settings.python, "-I", "-c", KERNEL_SOURCE, *map(str, limits)]


def bwrap_argv(
    settings: SandboxSettings, scratch: Path, uid: int | None, seccomp_fd: int, info_fd: int | None = None
) -> list[str]:
    """``bwrap`` with the sandbox's namespaces, mounts and seccomp filter, up to the command it runs in ``/work``.

    Run by root (``uid`` given), bubblewrap sets the sandbox up with root's
    rights (so it reaches the scratch directory wherever it is) and
    ``setpriv`` then drops the kernel to ``uid`` with no capabilities, no
    supplementary groups and no new privileges: as an ordinary uid of the host,
    ``RLIMIT_NPROC`` holds for it. Run by anyone else, bubblewrap maps the
    server's uid into a new user namespace and drops every capability there.

    Root binds ``scratch`` and its ``/tmp`` beside it (bounded tmpfs it mounted)
    as ``/work`` and ``/tmp``; anyone else gets bounded tmpfs that bubblewrap
    mounts there, ``scratch`` unused, and bubblewrap writes its sandbox's pid to
    ``info_fd`` (see :mod:`.scratch`). bubblewrap loads the filter read from ``seccomp_fd``.
    """
    args = [settings.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if uid is None:
        args += ["--unshare-user", "--uid", _SANDBOX_ID, "--gid", _SANDBOX_ID, "--disable-userns", "--cap-drop", "ALL"]
    args += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv", "--seccomp", str(seccomp_fd)]
    environment = (("PATH", "/usr/bin:/bin"), ("HOME", SCRATCH), ("LANG", "C.UTF-8"), ("PYTHONDONTWRITEBYTECODE", "1"))
    for name, value in environment:
        args += ["--setenv", name, value]
    # Directories bubblewrap makes for mount points are 0700 when it runs as root: the kernel's uid must enter them.
    for parent in sorted({str(Path(path).parent) for path in settings.runtime_paths} - {"/"}):
        args += ["--perms", "0755", "--dir", parent]
    for path in settings.runtime_paths:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    for link in ("bin", "lib", "lib64"):
        if os.path.islink(f"/{link}"):
            args += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    if uid is None:
        args += ["--perms", "1777", "--size", str(scratch_space.tmp_bytes(settings)), "--tmpfs", TMP]
        args += ["--size", str(scratch_space.quota_bytes(settings)), "--tmpfs", SCRATCH]
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
    else:
        args += ["--bind", str(scratch_space.tmp_dir(scratch)), TMP, "--bind", str(scratch), SCRATCH]
    args += ["--chdir", SCRATCH]
    # Unprivileged, the code's uid owns the sandbox's root and /dev: tmpfs without a size, host memory to fill.
    args += ["--remount-ro", "/", "--remount-ro", "/dev", "--"]
    if uid is not None:
        setpriv = shutil.which("setpriv") or "setpriv"
        args += [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
        args += ["--inh-caps=-all", "--bounding-set=-all", "--"]
    return args


def launch(settings: SandboxSettings, scratch: Path, uid: int | None, info_fd: int | None = None) -> Launch:
    """How to start a kernel over ``scratch``, as ``uid`` (None: as the server's user).

    Raises:
        ConfinementUnavailable: the seccomp filter cannot be made (checked by the self-test first).
    """
    if settings.confinement == "off":
        argv = limits_prefix(settings, False) + kernel_argv(settings, False)
        return Launch(argv, launch_env(str(scratch)), str(scratch))
    seccomp_fd = _seccomp_fd()
    bwrap = bwrap_argv(settings, scratch, uid, seccomp_fd, info_fd)
    argv = limits_prefix(settings, uid is not None) + bwrap + kernel_argv(settings, uid is not None)
    fds = (seccomp_fd, info_fd) if info_fd is not None and uid is None else (seccomp_fd,)
    return Launch(argv, launch_env(SCRATCH), pass_fds=fds, owned_fds=(seccomp_fd,))


def self_test(settings: SandboxSettings, uid: int | None) -> None:
    """Start one confined interpreter and see it answer; say why not.

    Run as root (``uid`` given), it mounts a bounded scratch space and ``/tmp`` as it will for each kernel.
    The line of Python it runs also checks that it cannot create a user namespace.

    Raises:
        ConfinementUnavailable: bubblewrap, prlimit, libseccomp or the interpreter is missing, the scratch space
            cannot be mounted, or the sandbox fails to start.
    """
    for tool in (settings.bwrap, "prlimit", "setpriv", settings.python):
        if shutil.which(tool) is None:
            raise ConfinementUnavailable(f"'{tool}' is not installed (Debian: apt-get install bubblewrap util-linux)")
    with tempfile.TemporaryDirectory(prefix="ferryman-sandbox-check-") as folder:
        work = Path(folder) / "work"
        work.mkdir()
        try:
            try:
                if uid is not None:
                    scratch_space.mount(work, settings, uid)
                    scratch_space.mount_tmp(work, settings, uid)
                done, wrote = _try_sandbox(settings, work, uid)
            finally:
                scratch_space.discard(work)
        except ScratchUnavailable as exc:
            raise ConfinementUnavailable(f"the scratch space could not be bounded: {exc}") from exc
    expected = f"{uid if uid is not None else _SANDBOX_ID} refused".encode()
    if done.returncode != 0 or done.stdout.strip() != expected or not wrote:
        detail = done.stderr.decode("utf-8", "replace").strip()[-500:] or done.stdout.decode("utf-8", "replace")
        raise ConfinementUnavailable(f"bubblewrap failed its self-test: {detail or f'exit {done.returncode}'}")


def _try_sandbox(
    settings: SandboxSettings, folder: Path, uid: int | None
) -> tuple[subprocess.CompletedProcess[bytes], bool]:
    """Run a line of Python confined over ``folder``: what it gave, and whether its file reached the scratch space."""
    code = (
        "import ctypes, os; open('/work/ok', 'w').write('ok'); open('/tmp/ok', 'w').write('ok'); "
        f"uid = os.getuid(); userns = ctypes.CDLL(None).unshare({_CLONE_NEWUSER}) == 0; "
        "print(uid, 'created a user namespace' if userns else 'refused')"
    )
    seccomp_fd = _seccomp_fd()
    try:
        prefix = limits_prefix(settings, uid is not None) + bwrap_argv(settings, folder, uid, seccomp_fd)
        done = subprocess.run(
            [*prefix, settings.python, "-I", "-c", code],
            capture_output=True,
            timeout=_SELF_TEST_SECONDS,
            env=launch_env(SCRATCH),
            pass_fds=(seccomp_fd,),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfinementUnavailable(f"the sandbox did not start: {exc}") from exc
    finally:
        os.close(seccomp_fd)
    # Unprivileged, /work is the sandbox's own tmpfs: the line printing after its write is the proof.
    return done, uid is None or (folder / "ok").is_file()


def _seccomp_fd() -> int:
    try:
        return syscalls.program_fd()
    except syscalls.FilterUnavailable as exc:
        raise ConfinementUnavailable(str(exc)) from exc
