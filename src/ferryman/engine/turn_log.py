"""A turn's lifecycle in the log: when a run of it starts, and how it ends (paused or finished).

The records go to the ``ferryman.turns`` logger at INFO. While a run goes on,
every record logged in it (a tool's failure, a model's error) names the turn,
its session and its agent (:func:`ferryman.logs.log_fields`); the request's id
and what the façade bound (a response's id) come with the context the run's
task inherited from the request that started it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from ferryman.logs import log_fields
from ferryman.turn_records import TurnRecord

log = logging.getLogger("ferryman.turns")


@contextmanager
def logged_turn(record: TurnRecord, begun: Literal["started", "resumed"]) -> Iterator[None]:
    """Log that a run of ``record``'s turn has ``begun``, then, once the block returns, how it ended.

    A block left by an exception logs no end: the engine stores every outcome before it returns,
    and what escapes it (a cancellation while storing one) is logged where it is caught.
    """
    with log_fields(turn_id=record.turn_id, session_id=record.session_id, agent_id=record.agent_id):
        log.info("turn %s", begun, extra={"event": f"turn_{begun}"})
        yield
        if record.status == "awaiting_input":
            log.info("turn paused, awaiting input", extra={"event": "turn_paused", "status": record.status})
            return
        code = record.error.code if record.error is not None else None
        ended = {"event": "turn_finished", "status": record.status, "error_code": code}
        log.info("turn finished: %s%s", record.status, f" ({code})" if code else "", extra=ended)
