"""The metrics of a ``ferryman serve`` on their own address (``telemetry.metrics_address``), and the directory
its ``--workers`` share them through.

Both live in the process ``ferryman serve`` starts: with several workers, that is the
supervisor, which serves none of the API and outlives every worker, so the listener reads the
workers' shared files; with one, the server itself, whose listener thread reads its registry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from ferryman.errors import ConfigurationError
from ferryman.telemetry_settings import TelemetrySettings, split_address

from .multiprocess import forget_dead, shared_metrics


class _SharedMetrics(Collector):
    """The metrics every worker wrote to ``directory``, summed, without the live gauges of dead workers."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._workers = MultiProcessCollector(None, path=str(directory))  # type: ignore[no-untyped-call]

    def collect(self) -> Iterable[Metric]:
        """What a scrape reads."""
        forget_dead(self._directory)
        return self._workers.collect()  # type: ignore[no-untyped-call,no-any-return]


@contextlib.contextmanager
def metrics_listener(address: str, directory: Path | None = None) -> Iterator[None]:
    """Serve the metrics (a server's workers' in ``directory``, else this process's) at ``address`` meanwhile.

    Raises:
        ConfigurationError: the address cannot be listened on.
    """
    host, port = split_address(address)
    registry = REGISTRY
    if directory is not None:
        registry = CollectorRegistry()
        registry.register(_SharedMetrics(directory))
    try:
        server, thread = start_http_server(port, host, registry)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ConfigurationError(f"cannot serve metrics on telemetry.metrics_address {address}: {why}") from exc
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def serving_metrics(telemetry: TelemetrySettings, workers: int) -> Iterator[None]:
    """Around a server's run: the workers' shared directory (several of them) and the metrics' own listener."""
    with contextlib.ExitStack() as stack:
        if not telemetry.metrics:
            yield
            return
        directory = stack.enter_context(shared_metrics()) if workers > 1 else None
        if telemetry.metrics_address is not None:
            stack.enter_context(metrics_listener(telemetry.metrics_address, directory))
        yield
