"""The metrics of one server, however many processes serve it.

A server of one process keeps its metrics in memory (prometheus_client's default registry).
One of several ``--workers`` processes writes them to files in a directory shared by the
server's processes (prometheus_client's multiprocess mode, switched on by
``PROMETHEUS_MULTIPROC_DIR`` before any worker imports it), and a scrape of any of them reads
and sums them all. The directory is made empty when the server starts, and removed when it stops;
a worker that ends marks itself dead, so its share of the ``livesum`` gauges (running turns)
leaves the sums, and so does that of a worker that died without doing so, at the next scrape.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""Where prometheus_client's multiprocess mode keeps each process's metrics (read when it is imported)."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus's text format, version 0.0.4: what every Prometheus reads (the metrics' names need no escaping)."""

_LIVE_GAUGE_FILE = re.compile(r"gauge_live\w+?_(\d+)\.db")


def shared_directory() -> Path | None:
    """The directory this process shares its metrics through, None when it keeps them to itself."""
    path = os.environ.get(MULTIPROC_ENV)
    return Path(path) if path else None


def exposition(directory: Path | None = None) -> bytes:
    """Every metric of the server in Prometheus's text format.

    Args:
        directory: The shared directory of a server of several processes (default: this process's, if any).
    """
    directory = directory or shared_directory()
    if directory is None:
        return generate_latest(REGISTRY)
    forget_dead(directory)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def forget_dead(directory: Path) -> None:
    """Drop the live gauges of the processes that wrote to ``directory`` and no longer run (killed, say)."""
    pids = {int(found.group(1)) for name in os.listdir(directory) if (found := _LIVE_GAUGE_FILE.fullmatch(name))}
    for pid in pids:
        if not _alive(pid):
            mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process under that id: not ours to judge, keep its gauges
        return True
    return True


def process_ended() -> None:
    """This process stops serving: take its live gauges out of the shared sums (nothing when it shares none)."""
    directory = shared_directory()
    if directory is not None:
        mark_process_dead(os.getpid(), str(directory))  # type: ignore[no-untyped-call]


@contextlib.contextmanager
def shared_metrics() -> Iterator[Path]:
    """Share the metrics of the processes started inside the block (``--workers``) through a new directory.

    An operator's ``PROMETHEUS_MULTIPROC_DIR`` is used (emptied first: what it holds is an earlier
    run's) and kept; otherwise a private temporary directory is made, and removed after the block.
    The variable is set for the block only: the processes started in it inherit it.
    """
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        directory = Path(given)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
    else:
        directory = Path(tempfile.mkdtemp(prefix="ferryman-metrics-"))
    os.environ[MULTIPROC_ENV] = str(directory)
    try:
        yield directory
    finally:
        if given:
            os.environ[MULTIPROC_ENV] = given
        else:
            os.environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(directory, ignore_errors=True)
