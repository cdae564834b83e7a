"""What one run of a turn or response adds to the metrics: running, first output, approvals, final status."""

from __future__ import annotations

import time
from typing import Any

from ferryman.engine.events import EngineEvent, TextDelta, ToolCallStarted, TurnAwaitingInput, TurnCompleted
from ferryman.metrics import instruments as metrics

UNKNOWN_STATUS = "failed"
"""The status counted for a run that ended without an outcome (its task failed outside the engine's guard)."""


class RunMetrics:
    """Counts one run, from its start to its stored outcome.

    Args:
        api: The façade that runs it.
        decided: How many approval requests of an earlier run this one carries out or refuses.
    """

    def __init__(self, api: metrics.Api, decided: int = 0) -> None:
        self.api = api
        self._decided = decided
        self._started: float | None = None
        self._first_seen = False
        self._status = UNKNOWN_STATUS

    def started(self) -> None:
        """The run's task began."""
        self._started = time.perf_counter()
        metrics.turn_started(self.api)
        metrics.approvals_decided(self._decided)

    def saw(self, event: EngineEvent) -> None:
        """The run sent ``event`` to its readers."""
        if not self._first_seen and isinstance(event, TextDelta | ToolCallStarted):
            self._first_seen = True
            if self._started is not None:
                metrics.first_event(self.api, time.perf_counter() - self._started)
        elif isinstance(event, TurnAwaitingInput | TurnCompleted) and event.turn.approval_requests:
            metrics.approvals_requested(len(event.turn.approval_requests))

    def returned(self, outcome: Any) -> None:
        """The run returned ``outcome``: a turn or a response, whose ``status`` is the one counted."""
        status = getattr(outcome, "status", None)
        if isinstance(status, str):
            self._status = status

    def ended(self) -> None:
        """The run's outcome is stored (or could not be): it runs no more."""
        if self._started is not None:
            metrics.turn_ended(self.api, self._status, time.perf_counter() - self._started)
