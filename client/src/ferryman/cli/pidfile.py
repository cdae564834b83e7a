"""The pidfile of the server ``ferryman serve --detach`` started: ``$FERRYMAN_HOME/server.pid``.

It records the process's id with what proves it is still that process (its start time
and command line), the server's URL and its log file: ``ferryman stop`` signals the
process only when both still match, so a pid the system gave to another process since is
never signalled; ``ferryman chat`` (and every client command) tells a server that died from
one it cannot reach.

Standard library only: the client's commands read it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

PIDFILE = "server.pid"
LOGFILE = "server.log"


def home() -> Path:
    """``$FERRYMAN_HOME``, else ``~/.ferryman`` (as :func:`ferryman.home.ferryman_home`)."""
    return Path(os.environ.get("FERRYMAN_HOME") or Path.home() / ".ferryman")


def pidfile_path() -> Path:
    """Where the detached server's pidfile is."""
    return home() / PIDFILE


def log_path() -> Path:
    """Where the detached server writes its log (appended)."""
    return home() / LOGFILE


@dataclass(frozen=True)
class Detached:
    """A server started by ``ferryman serve --detach``, as its pidfile records it.

    Attributes:
        pid: The server's process id.
        started: The process's start time, as :func:`start_time` tells it.
        command: Its command line (the arguments joined by spaces).
        url: The URL it serves.
        log: Its log file.
    """

    pid: int
    started: str
    command: str
    url: str
    log: str

    def state(self) -> str:
        """``running`` (this very process is alive), ``exited``, or ``replaced`` (the pid is another process's)."""
        started = start_time(self.pid)
        if started is None:
            return "exited"
        if started != self.started or command_line(self.pid) != self.command:
            return "replaced"
        return "running"

    def serves(self, url: str) -> bool:
        """Whether ``url`` is this server's address (same host and port; 127.0.0.1 and localhost alike)."""
        return _address(url) == _address(self.url)


def read() -> Detached | None:
    """The pidfile's server, or None without a (readable) pidfile."""
    try:
        data = json.loads(pidfile_path().read_text(encoding="utf-8"))
        return Detached(**{name: data[name] for name in ("pid", "started", "command", "url", "log")})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(detached: Detached) -> Path:
    """Record ``detached`` (replacing any pidfile); the pidfile's path."""
    path = pidfile_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{PIDFILE}.{os.getpid()}")
    partial.write_text(json.dumps(asdict(detached), indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)  # whole or absent: a reader never sees half of it
    return path


def remove(detached: Detached) -> None:
    """Remove the pidfile if it still names ``detached`` (not a server started since)."""
    if read() == detached:
        with contextlib.suppress(FileNotFoundError):
            pidfile_path().unlink()


def start_time(pid: int) -> str | None:
    """When process ``pid`` started (an opaque token), or None when no such process runs (a zombie is none)."""
    if pid <= 0:
        return None
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            # The command name (field 2) is in parentheses and may hold spaces: count after its last ')'.
            fields = stat.read_text(encoding="utf-8", errors="replace").rpartition(")")[2].split()
        except OSError:
            return None
        state, started = fields[0], fields[19]
        return None if state in ("Z", "X") else started
    shown = _ps(pid, "stat=,lstart=")
    if not shown or shown.startswith("Z"):
        return None
    return shown.partition(" ")[2].strip()


def command_line(pid: int) -> str | None:
    """Process ``pid``'s arguments joined by spaces, or None when it cannot be read."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    if Path("/proc/self/cmdline").exists():
        try:
            return " ".join(cmdline.read_bytes().decode("utf-8", "replace").split("\0")).strip()
        except OSError:
            return None
    return _ps(pid, "command=")


def _ps(pid: int, columns: str) -> str | None:
    """``ps``'s columns for ``pid`` (where there is no /proc: macOS, the BSDs)."""
    try:
        done = subprocess.run(
            ["ps", "-p", str(pid), "-o", columns], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def _address(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host in ("localhost", "127.0.0.1", "::1", "0.0.0.0", "::"):  # noqa: S104 - compared, not bound
        host = "loopback"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    return host, port
