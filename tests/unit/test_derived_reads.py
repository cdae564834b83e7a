"""Reads written once above the backends: a step found whichever read holds it, even one completing meanwhile."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ferryman.api.agents import InferenceStep, Step, ToolExecutionStep, Turn
from ferryman.api.content import CompletionMessage
from ferryman.errors import NotFoundError
from ferryman.storage.derived_reads import DerivedReads

pytestmark = pytest.mark.anyio

WHEN = datetime(2025, 5, 1, tzinfo=UTC)
ANSWER = CompletionMessage(content="", stop_reason="end_of_turn")
THOUGHT = InferenceStep(turn_id="turn_1", step_id="step_1", model_response=ANSWER)
CALLING = ToolExecutionStep(turn_id="turn_1", step_id="step_2", tool_calls=[], tool_responses=[])


class Turns(DerivedReads):
    """The two reads ``get_step`` derives from, answering as a store would at each call: ``views[i]`` is the
    turn's completed steps at the i-th read of it (the last repeats), ``pending`` its pending step."""

    def __init__(self, views: list[list[Step]], pending: Step | None, session_id: str = "sess_1") -> None:
        self.views, self.pending, self.session_id = views, pending, session_id
        self.reads: list[str] = []

    async def list_turns(self, session_ids: list[str], turn_ids: list[str] | None = None) -> list[Turn]:
        self.reads.append("turns")
        steps = self.views[min(self.reads.count("turns"), len(self.views)) - 1]
        if self.session_id not in session_ids:
            return []
        return [Turn(turn_id="turn_1", session_id=self.session_id, input_messages=[], steps=steps,
                     output_message=ANSWER, started_at=WHEN)]  # fmt: skip

    async def pending_step(self, turn_id: str) -> Step | None:
        self.reads.append("pending")
        return self.pending


async def test_a_completed_step_is_one_read() -> None:
    store = Turns([[THOUGHT]], CALLING)
    assert await store.get_step("sess_1", "turn_1", "step_1") == THOUGHT
    assert store.reads == ["turns"]


async def test_a_pending_step_is_found_by_its_second_read() -> None:
    store = Turns([[THOUGHT]], CALLING)
    assert await store.get_step("sess_1", "turn_1", "step_2") == CALLING
    assert store.reads == ["turns", "pending"]


async def test_a_step_completing_between_the_reads_is_found_by_reading_the_turn_again() -> None:
    store = Turns([[THOUGHT], [THOUGHT, CALLING]], None)  # pending at the first read, completed by the second
    assert await store.get_step("sess_1", "turn_1", "step_2") == CALLING
    assert store.reads == ["turns", "pending", "turns"]


async def test_a_step_of_another_sessions_turn_is_missing_without_reading_its_pending_step() -> None:
    store = Turns([[THOUGHT]], CALLING, session_id="sess_other")
    with pytest.raises(NotFoundError, match="step 'step_2' of turn 'turn_1' not found"):
        await store.get_step("sess_1", "turn_1", "step_2")
    assert store.reads == ["turns"]


async def test_an_unknown_step_is_missing() -> None:
    store = Turns([[THOUGHT]], CALLING)
    with pytest.raises(NotFoundError):
        await store.get_step("sess_1", "turn_1", "step_9")
