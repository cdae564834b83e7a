"""Statistics: percentiles of one run, and the median-of-runs figures built from runs.

A *run* is one timed window of one workload, summarised by the load generator
as a plain dict (see :func:`summarise_run`). A *figure* is one number the
benchmark reports: the median over repeated runs, with the runs' minimum and
maximum as its spread, its unit, and the errors counted while measuring it.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

RunSummary = dict[str, Any]


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``samples`` by linear interpolation.

    Args:
        samples: The values; need not be sorted.
        q: The percentile, from 0 to 100.

    Returns:
        The interpolated percentile, or NaN when there are no samples.
    """
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_summary(samples_ms: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99, mean and max of latencies in milliseconds."""
    if not samples_ms:
        return {"p50": math.nan, "p90": math.nan, "p99": math.nan, "mean": math.nan, "max": math.nan}
    return {
        "p50": percentile(samples_ms, 50),
        "p90": percentile(samples_ms, 90),
        "p99": percentile(samples_ms, 99),
        "mean": statistics.fmean(samples_ms),
        "max": max(samples_ms),
    }


def summarise_run(
    latencies_ms: Sequence[float],
    errors: dict[str, int],
    elapsed_s: float,
    extra: Mapping[str, Sequence[float]] | None = None,
    info: dict[str, Any] | None = None,
) -> RunSummary:
    """The JSON-able summary of one timed window.

    Args:
        latencies_ms: Latency of every successful operation.
        errors: Failed operations counted by kind (``http_409``, ``timeout``, ``shape``...).
        elapsed_s: Wall time of the window, from its start to the last operation's end.
        extra: Further per-operation measurements (e.g. time to first SSE event).
        info: Anything else worth passing back (ids, counts).

    Returns:
        A dict with ``ok``, ``errors``, ``error_kinds``, ``elapsed_s``, ``rate`` (ok/s),
        ``latency_ms`` and ``extra_ms`` summaries, and ``info``.
    """
    ok = len(latencies_ms)
    return {
        "ok": ok,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "elapsed_s": elapsed_s,
        "rate": ok / elapsed_s if elapsed_s > 0 else math.nan,
        "latency_ms": latency_summary(latencies_ms),
        "extra_ms": {name: latency_summary(values) for name, values in (extra or {}).items()},
        "info": info or {},
    }


@dataclass
class Figure:
    """One reported number: the median of its runs, with min/max as spread.

    Attributes:
        name: Dotted identifier, e.g. ``throughput.turn.c32``.
        label: Human-readable description for the table.
        unit: Unit of ``value`` (``ms``, ``turns/s``, ``x``, ``MiB``...).
        value: Median over ``runs``.
        min: Smallest run value.
        max: Largest run value.
        runs: Every run's value.
        errors: Errors counted while measuring it (all runs together).
        group: Section of the table it belongs to.
        headline: Whether it is one of the headline figures.
        error_kinds: ``errors`` counted by kind (``http_500``, ``timeout``, ``shape``...).
    """

    name: str
    label: str
    unit: str
    value: float
    min: float
    max: float
    runs: list[float]
    errors: int
    group: str
    headline: bool = False
    error_kinds: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """A JSON-able dict; NaN becomes None."""
        data = asdict(self)
        for key in ("value", "min", "max"):
            data[key] = _finite(data[key])
        data["runs"] = [_finite(v) for v in data["runs"]]
        return data


def _finite(value: float) -> float | None:
    return None if value is None or math.isnan(value) else round(value, 4)


def figure(
    name: str,
    label: str,
    unit: str,
    values: Iterable[float],
    errors: int,
    group: str,
    headline: bool = False,
    error_kinds: dict[str, int] | None = None,
) -> Figure:
    """A figure from per-run values (NaNs, from runs with no sample, are dropped)."""
    runs = [v for v in values if not math.isnan(v)]
    kinds = dict(error_kinds or {})
    if not runs:
        return Figure(name, label, unit, math.nan, math.nan, math.nan, [], errors, group, headline, kinds)
    middle, low, high = statistics.median(runs), min(runs), max(runs)
    return Figure(name, label, unit, middle, low, high, runs, errors, group, headline, kinds)


def from_runs(
    name: str,
    label: str,
    unit: str,
    runs: Sequence[RunSummary],
    pick: Callable[[RunSummary], float],
    group: str,
    headline: bool = False,
) -> Figure:
    """A figure whose per-run value ``pick`` reads from each run summary."""
    values = [pick(r) for r in runs]
    return figure(name, label, unit, values, total_errors(runs), group, headline, error_kinds(runs))


def ratio_figure(
    name: str,
    label: str,
    numerators: Sequence[RunSummary],
    denominators: Sequence[RunSummary],
    pick: Callable[[RunSummary], float],
    group: str,
    headline: bool = False,
) -> Figure:
    """A ratio computed run by run (runs are paired: they were interleaved), then summarised."""
    values = []
    for top, bottom in zip(numerators, denominators, strict=False):
        denominator = pick(bottom)
        values.append(pick(top) / denominator if denominator else math.nan)
    errors = total_errors(numerators) + total_errors(denominators)
    return figure(name, label, "x", values, errors, group, headline, error_kinds([*numerators, *denominators]))


def total_errors(runs: Iterable[RunSummary]) -> int:
    """Errors of all runs together."""
    return sum(int(r["errors"]) for r in runs)


def error_kinds(runs: Iterable[RunSummary]) -> dict[str, int]:
    """Errors of all runs together, by kind."""
    kinds: Counter[str] = Counter()
    for run in runs:
        kinds.update(run.get("error_kinds", {}))
    return dict(kinds)
