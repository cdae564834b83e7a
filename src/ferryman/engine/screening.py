"""The shields as the turn loop runs them: over the input, what the model says, and the calls it makes.

The checks themselves are :mod:`.shield_step`'s; here they meet the turn. A step
the model said is stored first without what it said (so that it keeps its place
before its shield steps, and a turn failing meanwhile stores nothing unjudged),
then goes on as the shields leave it: the model's, a shield's redacted form, or
the refusal that ends the turn.
"""

from __future__ import annotations

from typing import Any

from ferryman.api.agents import InferenceStep, ShieldCallStep, Turn
from ferryman.api.content import Message, ToolResponse, content_to_text
from ferryman.safety.base import Shield
from ferryman.turn_records import StepWrite

from .events import Emit
from .recorder import TurnRecorder
from .shield_step import Check, Screened, ShieldPhase, Withheld, refusal, screen, screen_calls
from .state import TurnState

_BARE: dict[str, Any] = {"content": "", "tool_calls": []}
"""What a step stored before shields judged it holds of its message: neither its text nor its calls."""


class TurnScreens:
    """Runs a turn's shields, each check kept as a step; ends the turn on a blocking verdict.

    Args:
        recorder: Keeps the turn's steps and its end.
        keep_blocked_text: Keep what a shield blocked in its ``shield_call`` step's violation
            metadata, for an operator's review (it is never replayed either way).
    """

    def __init__(self, recorder: TurnRecorder, keep_blocked_text: bool) -> None:
        self._recorder = recorder
        self._keep_blocked_text = keep_blocked_text

    async def screen(
        self, state: TurnState, shields: list[Shield], messages: list[Message], phase: ShieldPhase, emit: Emit
    ) -> Screened:
        """Judge ``messages`` with ``shields``, each check kept as a ``shield_call`` step."""

        async def save(step: ShieldCallStep) -> None:
            await self._recorder.save(state, step, emit)

        return await screen(shields, messages, phase, state.record.turn_id, save, emit, self._keep_blocked_text)

    def checker(self, state: TurnState, emit: Emit) -> Check:
        """:meth:`screen` for this turn, as the tool steps call it."""

        async def check(shields: list[Shield], messages: list[Message], phase: ShieldPhase) -> Screened:
            return await self.screen(state, shields, messages, phase, emit)

        return check

    async def answer(self, state: TurnState, step: InferenceStep, withheld: Withheld, emit: Emit) -> Turn:
        """Run the output shields over the final answer, whose text the client has not seen yet.

        The inference step is stored first without its text (so that it keeps its place before its
        shield steps), then once more with the answer as it ends the turn: the model's, a shield's
        redacted form, or the refusal of a blocking violation (the blocked text is never stored).
        """
        judged = await self.said(state, step, withheld, emit)
        if isinstance(judged, Turn):
            return judged
        await withheld.release()
        return await self._recorder.complete(state, judged.model_response, emit, last=judged)

    async def said(self, state: TurnState, step: InferenceStep, withheld: Withheld, emit: Emit) -> InferenceStep | Turn:
        """Judge a step's text with the output shields: the turn ended on the refusal, or the step as it goes on.

        On a pass the step keeps its text (or a shield's redacted form, which then replaces the
        held text deltas); its other held events are released by the caller.
        """
        message = step.model_response
        state.record.output_message = None  # a turn that fails meanwhile must not store the unjudged answer
        placeholder = step.model_copy(update={"model_response": message.model_copy(update=_BARE)})
        await self._recorder.store.save_step(state.record.turn_id, StepWrite(placeholder), state.record.infer_iters)
        state.steps.append(placeholder)
        screened = await self.screen(state, state.plan.output_shields, [*state.turn_input(), message], "output", emit)
        if screened.blocking is not None:
            answer = refusal(screened.blocking)
            last = step.model_copy(update={"model_response": answer})
            return await self._recorder.complete(state, answer, emit, last=last)
        said = message.model_copy(update={"content": screened.messages[-1].content})
        if said.content != message.content:
            withheld.replace_text(step.step_id, content_to_text(said.content))
        state.record.output_message = said
        return step.model_copy(update={"model_response": said})

    async def calls(
        self, state: TurnState, step: InferenceStep, withheld: Withheld, emit: Emit
    ) -> tuple[InferenceStep, dict[str, ToolResponse]]:
        """Judge the step's server tool calls' arguments with the tool input shields, before anything keeps them.

        The step is stored first without its calls, so that it keeps its place before its shield
        steps. A blocked call's arguments are withheld, a redacted call's take the redacted form:
        in the step, the message the history keeps and the held stream events alike.

        Returns:
            The step as the turn goes on with it, and the notes of the blocked calls by call id.
        """
        message = step.model_response
        judged = [call for call in message.tool_calls or [] if call.tool_name not in state.plan.client_tools]
        if not judged:
            return step, {}
        state.record.output_message = None  # a turn that fails meanwhile must not store the unjudged calls
        placeholder = step.model_copy(update={"model_response": message.model_copy(update=_BARE)})
        await self._recorder.store.save_step(state.record.turn_id, StepWrite(placeholder), state.record.infer_iters)
        self._recorder.place(state, placeholder)
        screened, blocked = await screen_calls(judged, state.plan.tool_input_shields, self.checker(state, emit))
        calls = [screened.get(call.call_id, call) for call in message.tool_calls or []]
        for before, after in zip(message.tool_calls or [], calls, strict=True):
            if after != before:
                withheld.replace_call(after)
        said = message.model_copy(update={"tool_calls": calls})
        state.record.output_message = said
        return step.model_copy(update={"model_response": said}), blocked
