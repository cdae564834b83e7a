"""The ferryman servers under test: one, or N replicas over a shared database, each on its own port.

Replicas are separate ``ferryman serve`` processes, as separate machines would
be (not ``--workers``, which shares one port): each has its own base URL, and
the load generator spreads its workers over them (see :mod:`bench.scenarios`).
Several replicas need state they can share: a ``postgresql://`` (or ``redis://``)
database, and a Redis for live events (``--redis``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .procs import ManagedProcess, ferryman_process

SHARED_DB_SCHEMES = ("postgresql://", "postgres://", "redis://", "rediss://")


def replica_refusal(count: int, db: str | None, redis: str | None) -> str | None:
    """Why ``count`` replicas cannot run over ``db`` with coordination ``redis``, if they cannot."""
    if count < 1:
        return f"--replicas must be 1 or more (got {count})"
    if count == 1:
        return None
    if not db or not db.startswith(SHARED_DB_SCHEMES):
        return (
            f"--replicas {count} needs a database the replicas share: --db postgresql://... (or redis://...); "
            "SQLite serves one process"
        )
    if not redis:
        return f"--replicas {count} needs --redis redis://... (the replicas share live events through it)"
    return None


def db_kind(db: str) -> str:
    """The kind of a ``--db`` value: its URL scheme, or ``sqlite`` for a path."""
    return db.split("://", 1)[0] if "://" in db else "sqlite"


class Replicas:
    """``count`` ``ferryman serve`` processes over one database, on free loopback ports (not started).

    Args:
        log_dir: Where their logs go (``ferryman.log``, or ``ferryman-1.log``... with several).
        db: Their ``--db``.
        inference_root: Root URL of the stub.
        count: How many replicas.
        redis: Their ``--redis``, if any.
        extra: More ``ferryman serve`` arguments for each (``--config FILE``).
    """

    def __init__(
        self,
        log_dir: Path,
        db: str,
        inference_root: str,
        count: int = 1,
        redis: str | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        options = [*(["--redis", redis] if redis else []), *extra]
        names = ["ferryman"] if count == 1 else [f"ferryman-{i + 1}" for i in range(count)]
        made = [ferryman_process(log_dir, db, inference_root, extra=options, name=name) for name in names]
        self.processes = [process for process, _ in made]
        self.bases = [base for _, base in made]

    def __len__(self) -> int:
        return len(self.processes)

    @property
    def first(self) -> ManagedProcess:
        """The first replica (the one profiled with ``--profile``)."""
        return self.processes[0]

    def start(self) -> None:
        """Launch every replica at once (each start takes seconds), then wait until all are healthy.

        Raises:
            RuntimeError: one exited or did not become healthy in time (every replica is stopped).
        """
        try:
            for process in self.processes:
                process.launch()
            for process in self.processes:
                process.wait_healthy()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every replica."""
        for process in self.processes:
            process.stop()

    def cpu_seconds(self) -> float:
        """CPU time used so far by all the replicas together, in seconds."""
        return sum(process.cpu_seconds() for process in self.processes)

    def rss_mib(self) -> list[float]:
        """Each replica's resident set size now, in MiB."""
        return [process.rss_mib() for process in self.processes]

    def log_tails(self) -> str:
        """The end of every replica's log, each under its name."""
        return "".join(f"--- {p.name} log (tail) ---\n{p.log_tail()}\n" for p in self.processes)
