"""Helpers for driving ferryman with the real ``llama_stack_client`` package."""

from __future__ import annotations

from dataclasses import dataclass

from llama_stack_client import LlamaStackClient

MODEL_ID = "scripted-model"


@dataclass(frozen=True)
class Conversation:
    """An agent and one session of it."""

    agent_id: str
    session_id: str


def open_conversation(client: LlamaStackClient, **config: object) -> Conversation:
    """Create an agent on the scripted model (``config`` overrides) and a session of it."""
    agent_config = {"model": MODEL_ID, "instructions": "You are a test agent.", **config}
    agent = client.agents.create(agent_config=agent_config)
    session = client.agents.session.create(agent_id=agent.agent_id, session_name="compat")
    return Conversation(agent.agent_id, session.session_id)
