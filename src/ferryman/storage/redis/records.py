"""Records as the Redis backend stores them: hash fields in, records out.

Absent optional values are absent hash fields (or ``''``, which no stored
value can be: they are ids, JSON documents or timestamps).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from ferryman.api.agents import TurnError, TurnStatus
from ferryman.api.content import Message
from ferryman.api.responses import Response, ResponseError
from ferryman.errors import FailureCode
from ferryman.storage import codec
from ferryman.storage.base import ResponseRecord, StepWrite, TurnRecord
from ferryman.storage.kernel.model import Owner
from ferryman.storage.owners import dump_owner
from ferryman.storage.redis.lua_responses import ResponseColumns
from ferryman.storage.redis.lua_turns import FinishTurn, SaveStep

RESPONSE_FIELDS = (
    "turn_id",
    "session_id",
    "conversation_id",
    "previous_response_id",
    "background",
    "body",
    "interrupted",
)


def lease_score(moment: datetime | None) -> float:
    """The score of a running turn in the lease index: no lease counts as long expired."""
    return moment.timestamp() if moment is not None else float("-inf")


def turn_of(turn_id: str, fields: dict[str, str]) -> TurnRecord:
    """A turn record from its hash; its lease is not read back (see :class:`TurnRecord`)."""
    code = fields.get("error_code")
    return TurnRecord(
        turn_id=turn_id,
        session_id=fields["session_id"],
        agent_id=fields.get("agent_id"),
        status=cast(TurnStatus, fields["status"]),
        input_messages=codec.load_inputs(fields["inputs"]),
        started_at=codec.require_time(fields["started_at"]),
        overrides=json.loads(fields["overrides"]),
        output_message=codec.load_completion(fields.get("output")),
        infer_iters=int(fields["infer_iters"]),
        error=TurnError(code=code, message=fields.get("error_message", "")) if code else None,
        completed_at=codec.load_time(fields.get("completed_at")),
    )


def turn_start_args(record: TurnRecord, messages: list[Message], owner: Owner | None) -> dict[str, Any]:
    """The arguments (:class:`~ferryman.storage.redis.lua_turns.TurnStart`'s) that store a new turn, its history
    messages and its owner."""
    return {
        "session_id": record.session_id,
        "agent_id": record.agent_id,
        "turn_id": record.turn_id,
        "status": record.status,
        "inputs": codec.dump_inputs(record.input_messages),
        "overrides": json.dumps(record.overrides),
        "started_at": codec.dump_time(record.started_at) or "",
        "lease": lease_score(record.lease_until),
        "messages": [codec.dump_message(m) for m in messages],
        "owner": None if owner is None else dump_owner(owner),
    }


def save_step_args(turn_id: str, write: StepWrite, infer_iters: int) -> SaveStep:
    """The arguments that store a step, its history messages and the turn's inference count."""
    return SaveStep(
        turn_id=turn_id,
        infer_iters=infer_iters,
        step_id=write.step.step_id,
        pending=write.pending,
        step=codec.dump_step(write.step),
        messages=[codec.dump_message(m) for m in write.messages],
    )


def finish_args(record: TurnRecord, last: StepWrite | None) -> FinishTurn:
    """The status, inference count, output, error and completion time a finished turn stores, with its last step."""
    error = record.error
    step = save_step_args(record.turn_id, last, record.infer_iters) if last is not None else None
    return FinishTurn(
        turn_id=record.turn_id,
        status=record.status,
        infer_iters=record.infer_iters,
        output=record.output_message.model_dump_json() if record.output_message else None,
        error_code=error.code if error else None,
        error_message=error.message if error else None,
        completed_at=codec.dump_time(record.completed_at),
        step_id=step.step_id if step else None,
        pending=step.pending if step else False,
        step=step.step if step else None,
        messages=step.messages if step else [],
    )


def response_columns(record: ResponseRecord) -> ResponseColumns:
    """The columns and body that store (or update) a response."""
    return ResponseColumns(
        response_id=record.response.id,
        turn_id=record.turn_id,
        session_id=record.session_id,
        conversation_id=record.conversation_id,
        previous_response_id=record.previous_response_id,
        background=record.background,
        body=record.response.model_dump_json(),
    )


def response_of(values: Sequence[str | None]) -> ResponseRecord:
    """A response from :data:`RESPONSE_FIELDS`.

    A response whose turn's lease ran out carries the failure as its own field
    (``interrupted``), laid over the stored body here: the script that fails it
    cannot rewrite a JSON document faithfully.
    """
    turn_id, session_id, conversation_id, previous_id, background, body, interrupted = values
    if turn_id is None or session_id is None or body is None:
        raise KeyError("response is incomplete")
    response = Response.model_validate_json(body)
    if interrupted is not None:
        failure = ResponseError(code=FailureCode.INTERRUPTED, message=interrupted)
        response = response.model_copy(update={"status": "failed", "error": failure})
    return ResponseRecord(
        response=response,
        turn_id=turn_id,
        session_id=session_id,
        conversation_id=conversation_id or None,
        previous_response_id=previous_id or None,
        background=background == "1",
    )
