"""``llama_stack_client`` 0.2.12 reads a turn sent with ``multitask_strategy: "enqueue"`` (issue #27, item 3).

The turn waits ``queued`` behind the running one; its stream starts when it starts, with only the
event types the library knows, and it completes.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from compat_support import Conversation
from llama_stack_client import LlamaStackClient
from llama_stack_client.types.agents import AgentTurnResponseStreamChunk

from ferryman.testing import ScriptedReply
from inprocess import Served

WAIT_SECONDS = 20


def _stream_enqueued(client: LlamaStackClient, chat: Conversation) -> list[AgentTurnResponseStreamChunk]:
    stream = client.agents.turn.create(
        agent_id=chat.agent_id,
        session_id=chat.session_id,
        messages=[{"role": "user", "content": "and then?"}],
        stream=True,
        extra_body={"multitask_strategy": "enqueue"},
    )
    return list(stream)


def test_an_enqueued_turn_streams_to_the_library_once_the_running_one_ended(
    client: LlamaStackClient, chat: Conversation, model: Served
) -> None:
    model.enqueue(ScriptedReply(text="first answer", gate="first"), ScriptedReply(text="second answer"))
    messages = [{"role": "user", "content": "first"}]
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(
            client.agents.turn.create, agent_id=chat.agent_id, session_id=chat.session_id, messages=messages
        )
        try:
            model.wait_for_requests(1)
            second = pool.submit(_stream_enqueued, client, chat)
            deadline = time.monotonic() + WAIT_SECONDS
            # Each read is a request to the app: the enqueued turn is stored by the time it lists it.
            while len(turns := client.agents.session.retrieve(chat.session_id, agent_id=chat.agent_id).turns) < 2:
                if second.done():  # its request failed: say how
                    second.result()
                assert time.monotonic() < deadline, "the enqueued turn was never stored"
            assert [turn.status for turn in turns] == ["in_progress", "queued"]  # type: ignore[attr-defined]
        finally:  # never leave the first turn (and the pool) waiting on the gate
            model.open_gate("first")
        chunks = second.result(timeout=30)
        assert first.result(timeout=30).output_message.content == "first answer"
    kinds = [chunk.event.payload.event_type for chunk in chunks]
    assert kinds[0] == "turn_start" and kinds[-1] == "turn_complete", kinds
    done = chunks[-1].event.payload.turn  # type: ignore[union-attr]
    assert done.output_message.content == "second answer"
    assert done.turn_id == turns[1].turn_id
