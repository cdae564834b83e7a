"""Guardrails of a response (Llama Stack's ``guardrails`` parameter): shields over its input and its answer.

The named shields run as the turn's input shields (before the model is asked)
and output shields (over the answer, whose text is withheld from the stream
until they passed). A blocking violation completes the response with one
assistant message whose content is a ``refusal`` part carrying the violation's
``user_message``, instead of output text.
"""

from __future__ import annotations

from ferryman.api.agents import ShieldCallStep
from ferryman.api.response_events import (
    ContentPartAdded,
    ContentPartDone,
    OutputItemAdded,
    OutputItemDone,
    RefusalDone,
    ResponseStreamEvent,
)
from ferryman.api.responses import CreateResponseRequest, MessageItem, Refusal
from ferryman.safety.base import Shield, ShieldRegistry

from .ids import new_item_id

FIELD = "guardrails"
_JUDGING = ("input", "output")
"""The shield phases whose blocking verdict is the response's refusal (tool shields only leave a note)."""


def guardrail_ids(request: CreateResponseRequest) -> list[str]:
    """The shield ids the request names, in order, each once."""
    ids = [g if isinstance(g, str) else g.type for g in request.guardrails or []]
    return list(dict.fromkeys(ids))


async def resolve_guardrails(request: CreateResponseRequest, shields: ShieldRegistry) -> list[Shield]:
    """The shields of the request's guardrails.

    Raises:
        InvalidRequestError: a guardrail names no shield the caller may use.
    """
    return await shields.resolve(guardrail_ids(request), FIELD)


class Verdicts:
    """Follows a response's shield steps: whether a guardrail blocked it."""

    def __init__(self) -> None:
        self._phases: dict[str, str] = {}
        self.refused = False

    def started(self, step_id: str, phase: object) -> None:
        """A shield step began, checking ``phase``."""
        self._phases[step_id] = str(phase)

    def completed(self, step: ShieldCallStep) -> None:
        """A shield step ended with its verdict."""
        violation = step.violation
        blocking = violation is not None and violation.violation_level == "error"
        if blocking and self._phases.pop(step.step_id, None) in _JUDGING:
            self.refused = True


def refusal_events(response_id: str, output_index: int, text: str, seq: int) -> list[ResponseStreamEvent]:
    """The stream events of the refusal message at ``output_index``, numbered from ``seq``."""
    item_id = new_item_id("message")
    part = Refusal(refusal=text)
    started = MessageItem(id=item_id, role="assistant", content=[], status="in_progress")
    done = MessageItem(id=item_id, role="assistant", content=[part], status="completed")
    at = {"response_id": response_id, "output_index": output_index}
    in_part = {"item_id": item_id, "output_index": output_index, "content_index": 0}
    return [
        OutputItemAdded(sequence_number=seq, item=started, **at),
        ContentPartAdded(sequence_number=seq + 1, response_id=response_id, part=Refusal(refusal=""), **in_part),
        RefusalDone(sequence_number=seq + 2, refusal=text, **in_part),
        ContentPartDone(sequence_number=seq + 3, response_id=response_id, part=part, **in_part),
        OutputItemDone(sequence_number=seq + 4, item=done, **at),
    ]
