"""Where a turn's input as sent was kept, what its input shields left of it: a redacted form, or placeholders.

The turn's record and history messages are stored when the turn starts, before any shield
ran (and a response's input items: :attr:`~.state.TurnState.input_copies`). Once an input
shield redacted the input, or blocked it, what the caller sent must outlive the check
nowhere: not in the turn, nor in the history later turns read (a session's next turn, a
``previous_response_id`` chain, a conversation), nor in those copies.
"""

from __future__ import annotations

from ferryman.api.content import CompletionMessage, Message
from ferryman.withheld import withheld_message

from .port import TurnWriter
from .state import TurnState


async def keep_redacted(store: TurnWriter, state: TurnState, given: list[Message], redacted: list[Message]) -> None:
    """Put the input shields' redacted form of the input ``given`` wherever the input as sent was kept."""
    await _replace(store, state, given, redacted)
    if state.input_copies is not None:
        await state.input_copies.redacted(given, redacted)


async def withhold_input(store: TurnWriter, state: TurnState, given: list[Message], answer: CompletionMessage) -> None:
    """Put placeholders (``ferryman/withheld.py``) wherever the blocked input ``given`` was kept, then the refusal.

    The refusal joins the history after the placeholders, as any answer does, so that later
    turns read the exchange in order, and never the input.
    """
    await _replace(store, state, given, [withheld_message(message) for message in given], answer)
    if state.input_copies is not None:
        await state.input_copies.withheld()


async def _replace(
    store: TurnWriter,
    state: TurnState,
    given: list[Message],
    kept: list[Message],
    answer: CompletionMessage | None = None,
) -> None:
    """Store ``kept`` (and the turn's ``answer``, if given) as the turn's input and history, in one write."""
    inputs = state.redacted_inputs(given, kept)
    answered: list[Message] = [answer] if answer is not None else []
    await store.redact_turn_input(state.record.turn_id, inputs, [*kept, *answered])
    state.record.input_messages = inputs
    state.replace_turn_input(kept)
    state.history.extend(answered)
