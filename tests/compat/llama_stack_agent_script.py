"""Drives ferryman with ``llama-stack-client==0.7.5``'s responses-backed ``Agent``; prints what it saw as JSON.

Runs under that client's own virtual environment (Python >= 3.12), never under
the test suite's: ``test_llama_stack_responses_agent.py`` starts it as a
subprocess with ``BASE_URL MODEL`` as arguments. Besides the high-level events
of two turns in one session, it checks every raw stream event and stored object
of those turns against the client's own models, strictly, because the client
itself silently turns an event it cannot validate into the wrong class.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any, get_args

import httpx
from llama_stack_client import LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent
from llama_stack_client.lib.agents.client_tool import client_tool
from llama_stack_client.types import ResponseListResponse, ResponseObject
from llama_stack_client.types.response_object_stream import ResponseObjectStream
from pydantic import BaseModel, TypeAdapter, ValidationError

WEATHER = "sunny, 21C"
tool_runs: list[dict[str, str]] = []


@client_tool
def get_weather(city: str) -> str:
    """Current weather of a city

    :param city: City name
    """
    tool_runs.append({"city": city})
    return f"{city}: {WEATHER}"


def as_json(value: Any) -> Any:
    """A high-level event (a dataclass, possibly holding pydantic models) as plain JSON."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return value


def turn(agent: Agent, session_id: str, question: str) -> list[dict[str, Any]]:
    """One streamed turn; each event as ``{"class": name, **fields}``."""
    chunks = agent.create_turn(messages=[{"role": "user", "content": question}], session_id=session_id, stream=True)
    return [{"class": type(chunk.event).__name__, **as_json(chunk.event)} for chunk in chunks]


def stream_event_models() -> dict[str, type[BaseModel]]:
    """The client's model of each stream event, by ``type`` (declared ``Optional[Literal[...]]``)."""
    variants = get_args(get_args(ResponseObjectStream)[0])
    return {get_args(get_args(m.model_fields["type"].annotation)[0])[0]: m for m in variants}


def schema_errors(http: httpx.Client, response_ids: list[str]) -> list[str]:
    """Every stream event and stored object of these responses the client's models reject."""
    errors: list[str] = []
    checks: list[tuple[str, TypeAdapter[Any], Any]] = []
    models = stream_event_models()
    for response_id in response_ids:
        with http.stream("GET", f"/v1/responses/{response_id}", params={"stream": "true"}) as replay:
            for line in replay.iter_lines():
                if not line.startswith("data:"):
                    continue
                event = json.loads(line.removeprefix("data:"))
                if event["type"] not in models:
                    errors.append(f"{response_id}: the client knows no event {event['type']}")
                else:
                    checks.append((f"{response_id} {event['type']}", TypeAdapter(models[event["type"]]), event))
        checks.append(
            (f"{response_id} object", TypeAdapter(ResponseObject), http.get(f"/v1/responses/{response_id}").json())
        )
    for listed in http.get("/v1/responses", params={"limit": 100}).json()["data"]:
        if listed["id"] in response_ids:
            checks.append((f"{listed['id']} listed", TypeAdapter(ResponseListResponse), listed))
    for name, adapter, value in checks:
        try:
            adapter.validate_python(value)
        except ValidationError as error:
            errors.append(f"{name}: {error}")
    return errors


def main(base_url: str, model: str) -> None:
    """Two turns in one session, then the strict check of every response they made."""
    with LlamaStackClient(base_url=base_url, max_retries=0) as client:
        agent = Agent(client, model=model, instructions="You are a test agent.", tools=[get_weather])
        session_id = agent.create_session("compat")
        turns = [turn(agent, session_id, "What is the weather in Paris?"), turn(agent, session_id, "And tomorrow?")]
    response_ids = [
        rid for events in turns for e in events if e["class"] == "TurnCompleted" for rid in e["response_ids"]
    ]
    with httpx.Client(base_url=base_url, timeout=30) as http:
        errors = schema_errors(http, response_ids)
    sys.stdout.write(json.dumps({"turns": turns, "tool_runs": tool_runs, "schema_errors": errors}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
