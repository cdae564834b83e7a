"""Row shapes shared by the SQL backends: turn and response columns, items, pages of a list."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from ferryman.api.agents import TurnError
from ferryman.api.responses import Item, Response
from ferryman.storage import codec
from ferryman.storage.base import ResponseRecord, TurnRecord


def turn_record(row: Sequence[Any], time_of: Callable[[Any], datetime | None]) -> TurnRecord:
    """A :class:`TurnRecord` from a row of ``sql.turn_statements.TURN_COLUMNS``; ``time_of`` reads the backend's
    timestamps."""
    error = TurnError(code=row[8], message=row[9] or "") if row[8] else None
    started_at = time_of(row[10])
    if started_at is None:
        raise ValueError(f"turn {row[0]} has no start time")
    return TurnRecord(
        turn_id=row[0],
        session_id=row[1],
        agent_id=row[2],
        status=row[3],
        input_messages=codec.load_inputs(row[4]),
        output_message=codec.load_completion(row[5]),
        overrides=json.loads(row[6]),
        infer_iters=row[7],
        error=error,
        started_at=started_at,
        completed_at=time_of(row[11]),
    )


ITEM = TypeAdapter(Item)
"""Decodes one stored item."""


def response_record(row: Sequence[Any]) -> ResponseRecord:
    """A :class:`ResponseRecord` from a row of ``sql.domain_tables.RESPONSE_COLUMNS`` (Redis writes the same)."""
    return ResponseRecord(
        response=Response.model_validate_json(row[6]),
        turn_id=row[1],
        session_id=row[2],
        conversation_id=row[3],
        previous_response_id=row[4],
        background=bool(row[5]),
    )
