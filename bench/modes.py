"""How big each kind of run is: ``--smoke`` (seconds), ``--quick`` (< 2 min), full (< ~10 min).

The numbers are sized for a 2-core machine where the load generator, the stub
and ferryman share the cores.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Mode:
    """The sizes of one benchmark run.

    Attributes:
        name: ``smoke``, ``quick`` or ``full``.
        repeats: Timed runs per figure; figures are the median over them.
        window_s: Length of one closed-loop timed window.
        concurrencies: Concurrent clients for the throughput sweep.
        latency_window_s: Window of the concurrency-1 latency workloads (stream, client tool, listing).
        history_checkpoints: Turn numbers N whose latency is reported in the history test.
        history_repeats: Fresh sessions run up to the last checkpoint (one in a full run: a
            session of 1,000 turns takes minutes, as each turn re-sends the whole history).
        sessions: Sessions created for the listing and memory figures.
        seed_concurrency: Clients creating those sessions.
        turns_per_session: Turns after which a throughput worker opens a new session.
    """

    name: str
    repeats: int
    window_s: float
    concurrencies: tuple[int, ...]
    latency_window_s: float
    history_checkpoints: tuple[int, ...]
    history_repeats: int
    sessions: int
    seed_concurrency: int = 16
    turns_per_session: int = 20


MODES: dict[str, Mode] = {
    "smoke": Mode(
        name="smoke",
        repeats=1,
        window_s=0.2,
        concurrencies=(1, 4),
        latency_window_s=0.2,
        history_checkpoints=(1, 3),
        history_repeats=1,
        sessions=120,
        seed_concurrency=4,
    ),
    "quick": Mode(
        name="quick",
        repeats=3,
        window_s=0.8,
        concurrencies=(1, 8, 32, 128),
        latency_window_s=0.8,
        history_checkpoints=(1, 10, 100),
        history_repeats=3,
        sessions=1_000,
    ),
    "full": Mode(
        name="full",
        repeats=5,
        window_s=3.0,
        concurrencies=(1, 8, 32, 128),
        latency_window_s=2.0,
        history_checkpoints=(1, 10, 100, 1000),
        history_repeats=1,
        sessions=10_000,
    ),
}


def select(name: str, repeats: int | None = None, window_s: float | None = None) -> Mode:
    """The named mode, with ``repeats`` / ``window_s`` overridden when given."""
    mode = MODES[name]
    if repeats is not None:
        mode = replace(mode, repeats=repeats)
    if window_s is not None:
        mode = replace(mode, window_s=window_s, latency_window_s=window_s)
    return mode
