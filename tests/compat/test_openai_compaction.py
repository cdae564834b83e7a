"""Compaction through OpenAI's clients: ``responses.compact`` of the ``openai`` SDK, and openai-agents'
``OpenAIResponsesCompactionSession``, which only takes OpenAI model names: ``gpt-4.1-mini`` is registered
as an alias of the scripted model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest
from agents import (
    Agent,
    OpenAIResponsesCompactionSession,
    OpenAIResponsesModel,
    Runner,
    SQLiteSession,
    set_tracing_disabled,
)

from inprocess import BASE_URL, Served

ALIAS = "gpt-4.1-mini"
SUMMARY = "The user is Ada, who keeps ferries."


@pytest.fixture()
def aliased(model: Served) -> Iterator[Served]:
    """``gpt-4.1-mini`` routed to the scripted model, for this test only."""
    body = {"model_id": ALIAS, "provider_id": "remote", "provider_model_id": "scripted-model"}
    assert model.http.post("/v1/models", json=body).status_code == 200
    yield model
    assert model.http.delete(f"/v1/models/{ALIAS}").status_code == 200


@pytest.fixture()
def client(aliased: Served) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=aliased.sdk_http_client(), api_key="unused", max_retries=0
    ) as sdk:
        yield sdk


def _said(request: dict[str, Any]) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in request["messages"]]


def test_a_compacted_conversation_continues_from_its_sealed_summary(aliased: Served, client: openai.OpenAI) -> None:
    aliased.enqueue_text("Nice to meet you, Ada.")
    first = client.responses.create(model=ALIAS, input="My name is Ada and I keep ferries.")
    aliased.enqueue_text(SUMMARY)
    compacted = client.responses.compact(model=ALIAS, previous_response_id=first.id)

    assert compacted.object == "response.compaction"
    *users, item = compacted.output
    assert [u.role for u in users] == ["user"] and item.type == "compaction"  # type: ignore[union-attr]
    sealed = item.encrypted_content  # type: ignore[union-attr]
    assert "Ada" not in sealed and SUMMARY not in compacted.model_dump_json(warnings=False)
    summarizing = aliased.requests()[-1]
    assert "My name is Ada" in _said(summarizing)[-1] and "Nice to meet you" in _said(summarizing)[-1]

    aliased.enqueue_text("You are Ada.")
    given = [entry.model_dump(exclude_none=True, warnings=False) for entry in compacted.output]
    answer = client.responses.create(model=ALIAS, input=[*given, {"role": "user", "content": "Who am I?"}])
    assert answer.output_text == "You are Ada."
    read = _said(aliased.requests()[-1])
    assert read[-1] == "Who am I?" and any(SUMMARY in text for text in read)
    assert not any("Nice to meet you" in text for text in read)  # the summary stands in for the answer

    forged = {
        "type": "compaction",
        "encrypted_content": sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB"),
    }
    with pytest.raises(openai.BadRequestError, match="encrypted_content"):
        client.responses.create(model=ALIAS, input=[forged, {"role": "user", "content": "Who am I?"}])


def test_openai_agents_compaction_session_compacts_through_ferryman(aliased: Served) -> None:
    set_tracing_disabled(True)
    aliased.enqueue_text("Noted, Ada.")
    aliased.enqueue_text(SUMMARY)  # the compaction after the first run
    aliased.enqueue_text("You are Ada.")
    aliased.enqueue_text(SUMMARY)  # and after the second

    async def main() -> tuple[str, list[Any]]:
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=aliased.http.app), base_url=BASE_URL)
        async with openai.AsyncOpenAI(base_url=f"{BASE_URL}/v1", http_client=http, api_key="unused") as sdk:
            session = OpenAIResponsesCompactionSession(
                "ada",
                SQLiteSession("ada"),
                client=sdk,
                model=ALIAS,
                should_trigger_compaction=lambda context: bool(context["compaction_candidate_items"]),
            )
            agent = Agent(name="ferry", instructions="Be brief.", model=OpenAIResponsesModel(ALIAS, sdk))
            await Runner.run(agent, "My name is Ada.", session=session)
            result = await Runner.run(agent, "Who am I?", session=session)
            return str(result.final_output), await session.get_items()

    answer, items = aliased.call(main)
    assert answer == "You are Ada."
    assert [item.get("type") for item in items][-1] == "compaction"
    second_run = _said(aliased.requests()[2])
    assert second_run[-1] == "Who am I?" and any(SUMMARY in text for text in second_run)
