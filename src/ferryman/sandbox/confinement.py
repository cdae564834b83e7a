"""How a kernel is started: bubblewrap's namespaces around the interpreter, rlimits set by ``prlimit``.

The sandbox sees the interpreter's runtime read-only, a fresh ``/proc``, a
minimal ``/dev``, a small private ``/tmp`` and its session's bounded scratch
space as ``/work`` (see :mod:`.scratch`); nothing else of the host (no network, no server database,
config or ``FERRYMAN_HOME``). The limits are set by util-linux ``prlimit`` before
``bwrap`` is executed (no Python ``preexec_fn``: the server has threads).

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

from . import scratch as scratch_space
from .scratch import SCRATCH, ScratchUnavailable
from .settings import SandboxSettings

log = logging.getLogger(__name__)

KERNEL_SOURCE = (Path(__file__).with_name("kernel_main.py")).read_text(encoding="utf-8")
_SANDBOX_ID = "65534"
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
        pass_fds: Descriptors the command inherits (bubblewrap's ``--info-fd``).
    """

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    pass_fds: tuple[int, ...] = ()


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
        "--core=0",
    ]
    if count_processes:
        args.append(f"--nproc={settings.max_processes}")
    return [*args, "--"]


def kernel_argv(settings: SandboxSettings) -> list[str]:
    """The interpreter running the kernel, isolated from the environment and user site."""
    return [settings.python, "-I", "-c", KERNEL_SOURCE, str(settings.cpu_seconds), str(settings.output_chars)]


def bwrap_argv(settings: SandboxSettings, scratch: Path, uid: int | None, info_fd: int | None = None) -> list[str]:
    """``bwrap`` with the sandbox's namespaces and mounts, up to the command it runs in ``/work``.

    Run by root (``uid`` given), bubblewrap sets the sandbox up with root's
    rights (so it reaches the scratch directory wherever it is) and
    ``setpriv`` then drops the kernel to ``uid`` with no capabilities, no
    supplementary groups and no new privileges: as an ordinary uid of the host,
    ``RLIMIT_NPROC`` holds for it. Run by anyone else, bubblewrap maps the
    server's uid into a new user namespace and drops every capability there.

    Root binds ``scratch`` (a bounded tmpfs it mounted) as ``/work``; anyone
    else gets a bounded tmpfs that bubblewrap mounts there, ``scratch`` unused,
    and bubblewrap writes its sandbox's pid to ``info_fd`` (see :mod:`.scratch`).
    """
    args = [settings.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if uid is None:
        args += ["--unshare-user", "--uid", _SANDBOX_ID, "--gid", _SANDBOX_ID, "--disable-userns", "--cap-drop", "ALL"]
    args += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
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
    args += ["--perms", "1777", "--size", str(settings.max_file_mb * _MB), "--tmpfs", "/tmp"]
    if uid is None:
        args += ["--size", str(scratch_space.quota_bytes(settings)), "--tmpfs", SCRATCH]
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
    else:
        args += ["--bind", str(scratch), SCRATCH]
    args += ["--chdir", SCRATCH]
    # Unprivileged, the code's uid owns the sandbox's root and /dev: tmpfs without a size, host memory to fill.
    args += ["--remount-ro", "/", "--remount-ro", "/dev", "--"]
    if uid is not None:
        setpriv = shutil.which("setpriv") or "setpriv"
        args += [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
        args += ["--inh-caps=-all", "--bounding-set=-all", "--"]
    return args


def launch(settings: SandboxSettings, scratch: Path, uid: int | None, info_fd: int | None = None) -> Launch:
    """How to start a kernel over ``scratch``, as ``uid`` (None: as the server's user)."""
    if settings.confinement == "off":
        return Launch(limits_prefix(settings, False) + kernel_argv(settings), launch_env(str(scratch)), str(scratch))
    bwrap = bwrap_argv(settings, scratch, uid, info_fd)
    argv = limits_prefix(settings, uid is not None) + bwrap + kernel_argv(settings)
    fds = (info_fd,) if info_fd is not None and uid is None else ()
    return Launch(argv, launch_env(SCRATCH), pass_fds=fds)


def self_test(settings: SandboxSettings, uid: int | None) -> None:
    """Start one confined interpreter and see it answer; say why not.

    Run as root (``uid`` given), it mounts a bounded scratch space as it will for each session.

    Raises:
        ConfinementUnavailable: bubblewrap, prlimit or the interpreter is missing, the scratch space
            cannot be mounted, or the sandbox fails to start.
    """
    for tool in (settings.bwrap, "prlimit", "setpriv", settings.python):
        if shutil.which(tool) is None:
            raise ConfinementUnavailable(f"'{tool}' is not installed (Debian: apt-get install bubblewrap util-linux)")
    with tempfile.TemporaryDirectory(prefix="ferryman-sandbox-check-") as folder:
        try:
            if uid is not None:
                scratch_space.mount(Path(folder), settings, uid)
            try:
                done, wrote = _try_sandbox(settings, Path(folder), uid)
            finally:
                scratch_space.unmount(Path(folder))
        except ScratchUnavailable as exc:
            raise ConfinementUnavailable(f"the scratch space could not be bounded: {exc}") from exc
    expected = str(uid if uid is not None else _SANDBOX_ID).encode()
    if done.returncode != 0 or done.stdout.strip() != expected or not wrote:
        detail = done.stderr.decode("utf-8", "replace").strip()[-500:] or f"exit status {done.returncode}"
        raise ConfinementUnavailable(f"bubblewrap failed its self-test: {detail}")


def _try_sandbox(
    settings: SandboxSettings, folder: Path, uid: int | None
) -> tuple[subprocess.CompletedProcess[bytes], bool]:
    """Run a line of Python confined over ``folder``: what it gave, and whether its file reached the scratch space."""
    prefix = limits_prefix(settings, uid is not None) + bwrap_argv(settings, folder, uid)
    code = "import os; open('/work/ok', 'w').write('ok'); print(os.getuid())"
    try:
        done = subprocess.run(
            [*prefix, settings.python, "-I", "-c", code],
            capture_output=True,
            timeout=_SELF_TEST_SECONDS,
            env=launch_env(SCRATCH),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfinementUnavailable(f"the sandbox did not start: {exc}") from exc
    # Unprivileged, /work is the sandbox's own tmpfs: the line printing after its write is the proof.
    return done, uid is None or (folder / "ok").is_file()
