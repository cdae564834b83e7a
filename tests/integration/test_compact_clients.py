"""``client.responses.compact`` (sync and async): a conversation summarized into a ``compaction`` item, and a
later response whose input gives that item back reads the summary in place of what it summarized.

The CLI's ``ferryman responses compact`` is in ``test_webhook_compact_cli.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ferryman.api.responses import CompactedResponse, CompactionItem, MessageItem, OutputText, Response
from ferryman.client import AsyncClient, BadRequestError, Client
from ferryman.engine.summary import INSTRUCTIONS
from ferryman.testing import Script, ScriptedReply
from inprocess import BASE_URL, Served, check_script, migrated_sqlite, served_services, serving

MODEL = "scripted-model"
SUMMARY = "The user is Ada, a ferry captain."
ANSWER = "Nice to meet you, Ada."


@pytest.fixture()
async def served(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[AsyncClient, Script]]:
    """An ``AsyncClient`` of a server on this loop, and the script of its model."""
    script = Script()
    services = served_services(Path(migrated_sqlite(tmp_path / "compact.db")), script)
    async with serving(services) as http, AsyncClient(base_url=BASE_URL, http_client=http, max_retries=0) as client:
        yield client, script
    check_script(request, script)


def _check_compacted(compacted: CompactedResponse) -> CompactionItem:
    """The compaction item, after the one user message (and nothing of the model's answer)."""
    assert compacted.object == "response.compaction"
    user, last = compacted.output
    assert isinstance(user, MessageItem) and user.role == "user"
    assert isinstance(last, CompactionItem) and last.encrypted_content
    assert SUMMARY not in last.encrypted_content, "the summary is sealed"
    assert ANSWER not in compacted.model_dump_json()
    return last


def _answer(response: Response) -> str:
    assert response.status == "completed"
    return "".join(
        part.text
        for item in response.output
        if isinstance(item, MessageItem) and not isinstance(item.content, str)
        for part in item.content
        if isinstance(part, OutputText)
    )


def _read_in_place(request: dict[str, object]) -> None:
    """The follow-up's prompt holds the summary and the new question, not the answer the summary stands for."""
    text = str(request["messages"])
    assert SUMMARY in text and "What is my name?" in text
    assert ANSWER not in text


@pytest.mark.anyio
async def test_the_async_sdk_compacts_a_chain_and_a_follow_up_reads_the_summary(
    served: tuple[AsyncClient, Script],
) -> None:
    client, script = served
    script.enqueue(ScriptedReply(text=ANSWER), ScriptedReply(text=SUMMARY), ScriptedReply(text="Ada."))
    first = await client.responses.create(model=MODEL, input="I am Ada, a ferry captain.")
    compacted = await client.responses.compact(model=MODEL, previous_response_id=first.id)
    _check_compacted(compacted)
    assert script.requests[1]["messages"][0]["content"] == INSTRUCTIONS  # the model wrote the summary

    question = {"type": "message", "role": "user", "content": "What is my name?"}
    follow_up = await client.responses.create(model=MODEL, input=[*compacted.output, question])
    assert _answer(follow_up) == "Ada."
    _read_in_place(script.requests[2])


def test_the_sync_sdk_compacts_items_and_refuses_a_changed_compaction(model: Served) -> None:
    model.enqueue(ScriptedReply(text=SUMMARY), ScriptedReply(text="Ada."))
    with Client(base_url=BASE_URL, http_client=model.http_client(), max_retries=0) as client:
        items = [
            {"type": "message", "role": "user", "content": "I am Ada, a ferry captain."},
            {"type": "message", "role": "assistant", "content": ANSWER},
        ]
        compacted = client.responses.compact(model=MODEL, input=items)
        item = _check_compacted(compacted)

        question = {"type": "message", "role": "user", "content": "What is my name?"}
        follow_up = client.responses.create(model=MODEL, input=[*compacted.output, question])
        assert _answer(follow_up) == "Ada."
        _read_in_place(model.requests()[-1])

        sealed = item.encrypted_content
        # Flip the first character to one it cannot already be, so the change is never a no-op.
        flipped = "y" if sealed[0] == "x" else "x"
        changed = item.model_copy(update={"encrypted_content": flipped + sealed[1:]})
        with pytest.raises(BadRequestError) as refused:
            client.responses.create(model=MODEL, input=[changed, question])
        assert "encrypted_content" in str(refused.value)
        with pytest.raises(BadRequestError):
            client.responses.compact(model=MODEL)  # nothing to compact
