"""Double-texting in a conversation: a response sent while another runs there (``multitask_strategy``).

A conversation's responses are the turns of its session, so they queue as the Agents API's turns do
(``turn_queue.py``): ``enqueue``, ``interrupt`` and ``rollback`` store the response's turn ``queued``,
and its run waits there until it is the oldest queued turn and none runs. A queued response continues
the conversation as it stands when it starts: its history is read again then, so it follows what the
responses before it added.
"""

from __future__ import annotations

from collections.abc import Callable

from ferryman.api.agents import MultitaskStrategy
from ferryman.api.content import Message
from ferryman.engine.events import Emit
from ferryman.engine.state import TurnState
from ferryman.storage.domain.forks import Lineages

from ..fork_reads import ForkReads
from ..host import TurnHost
from ..turn_queue import TurnQueue
from .compaction import ConversationRead, Sealing
from .items import items_to_messages


class ConversationQueue:
    """Starts a conversation's queued responses in their turn, after making way as their strategy says.

    Args:
        host: Storage, the runner, leases and the fan-out.
        sealing: Opens the conversation's compaction items, as the history a response continues holds them.
        stream: The name of a response's event stream, by the response's id.
    """

    def __init__(self, host: TurnHost, sealing: Sealing, stream: Callable[[str], str]) -> None:
        self._host = host
        self._store = host.store
        self._reads = ForkReads(host.store, Lineages(host.store.kernel))
        self._sealing = sealing
        self._stream = stream

    async def take_turn(
        self,
        state: TurnState,
        strategy: MultitaskStrategy,
        conversation_id: str,
        fresh: list[Message],
        read: ConversationRead | None,
        emit: Emit,
    ) -> bool:
        """Wait until the queued response's turn runs, then give it the conversation's history as it is now.

        Args:
            state: The response's turn (its history is replaced by the conversation's, then ``fresh``).
            strategy: ``enqueue``, ``interrupt`` or ``rollback``.
            conversation_id: The conversation.
            fresh: The response's own new messages.
            read: Where its read of the conversation ends: it moves to the last item read when it starts.
            emit: Where the turn's events go (its failure, should it never leave the queue).

        Returns:
            Whether the turn runs (False: it was failed in the queue, and its failure emitted).
        """

        session_id = state.record.session_id

        async def stream_of(turn_id: str) -> str | None:
            response_id = await self._store.turn_response(session_id, turn_id)  # one indexed read
            return None if response_id is None else self._stream(response_id)

        async def started() -> None:
            items = await self._sealing.opened(await self._reads.items(conversation_id))
            state.history = [*items_to_messages(items), *fresh]
            if read is not None:
                read.last_read = items[-1].id if items else None

        host = self._host
        queue = TurnQueue(
            self._store,
            host.guard,
            host.runner,
            host.fanout,
            stream_of,
            host.cancel_everywhere,
            host.rollback_wait_seconds,
        )
        return await queue.take_turn(state.record, strategy, state.span, emit, host.leases.until, started)

    async def check(self, session_id: str, strategy: MultitaskStrategy) -> None:
        """Refuse a strategy that would stop a response the caller may not stop, before anything is stored
        (``TurnQueue.check``)."""
        host = self._host
        await TurnQueue(self._store, host.guard, host.runner, host.fanout, _unknown, host.cancel_everywhere).check(
            session_id, strategy
        )


async def _unknown(turn_id: str) -> str | None:
    """No stream is looked up by a check."""
    return None
