"""Drives ferryman with ``llama-stack-client==0.7.5``'s ``Agent`` holding a server-side ``file_search`` tool.

Runs under that client's own virtual environment, as
``llama_stack_agent_script.py`` does (whose helpers it reuses), with
``BASE_URL MODEL VECTOR_STORE_ID`` as arguments; prints the turn's events, and
every stream event or stored object of it the client's models reject, as JSON.
"""

from __future__ import annotations

import json
import sys

import httpx
from llama_stack_agent_script import schema_errors, turn
from llama_stack_client import LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent


def main(base_url: str, model: str, vector_store_id: str) -> None:
    """One streamed turn that searches the vector store, then the strict check of its responses."""
    search = {"type": "file_search", "vector_store_ids": [vector_store_id], "ranking_options": {"ranker": "keyword"}}
    with LlamaStackClient(base_url=base_url, max_retries=0) as client:
        agent = Agent(client, model=model, instructions="Answer from the files.", tools=[search])
        session_id = agent.create_session("file-search")
        events = turn(agent, session_id, "When does the first ferry leave?")
    response_ids = [rid for e in events if e["class"] == "TurnCompleted" for rid in e["response_ids"]]
    with httpx.Client(base_url=base_url, timeout=30) as http:
        errors = schema_errors(http, response_ids)
    sys.stdout.write(json.dumps({"events": events, "schema_errors": errors}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
