"""``llama_stack_client`` 0.2.12 on toolgroups, tools, the tool runtime, and an ``Agent`` using a registered group."""

from __future__ import annotations

import uuid

import llama_stack_client
import pytest
from llama_stack_client import LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent

from inprocess import Served


def test_register_list_get_and_unregister_a_toolgroup(client: LlamaStackClient) -> None:
    """``toolgroups.register`` persists a group the other calls see, until ``toolgroups.unregister``."""
    group_id = f"compat-{uuid.uuid4().hex[:8]}"
    client.toolgroups.register(toolgroup_id=group_id, provider_id="builtin::math", args={"unit": "none"})

    assert group_id in [group.identifier for group in client.toolgroups.list()]
    group = client.toolgroups.get(group_id)
    assert (group.identifier, group.provider_id, group.type, group.args) == (
        group_id,
        "builtin::math",
        "tool_group",
        {"unit": "none"},
    )
    tools = client.tools.list(toolgroup_id=group_id)
    assert [(tool.identifier, tool.toolgroup_id) for tool in tools] == [("calculator", group_id)]
    assert [d.name for d in client.tool_runtime.list_tools(tool_group_id=group_id)] == ["calculator"]
    assert client.tools.get("calculator").identifier == "calculator"

    client.toolgroups.unregister(group_id)
    assert group_id not in [group.identifier for group in client.toolgroups.list()]
    with pytest.raises(llama_stack_client.NotFoundError):
        client.toolgroups.get(group_id)


def test_registering_a_taken_id_with_other_settings_is_a_conflict(client: LlamaStackClient) -> None:
    group_id = f"compat-{uuid.uuid4().hex[:8]}"
    client.toolgroups.register(toolgroup_id=group_id, provider_id="builtin::math")
    client.toolgroups.register(toolgroup_id=group_id, provider_id="builtin::math")  # the same again: fine
    with pytest.raises(llama_stack_client.ConflictError):
        client.toolgroups.register(toolgroup_id=group_id, provider_id="builtin::math", args={"other": True})
    with pytest.raises(llama_stack_client.BadRequestError):
        client.toolgroups.register(toolgroup_id=f"{group_id}-x", provider_id="no-such-provider")


def test_invoke_tool_runs_a_server_tool(client: LlamaStackClient) -> None:
    result = client.tool_runtime.invoke_tool(tool_name="calculator", kwargs={"expression": "6 * 7"})
    assert (result.content, result.error_message) == ("42", None)


def test_an_agent_uses_a_registered_toolgroup(client: LlamaStackClient, model: Served) -> None:
    """``Agent(tools=[registered id])`` learns the group's tools and the server runs them within the turn."""
    group_id = f"compat-{uuid.uuid4().hex[:8]}"
    client.toolgroups.register(toolgroup_id=group_id, provider_id="builtin::math")
    agent = Agent(client, model="scripted-model", instructions="Use the tools.", tools=[group_id])
    assert agent.builtin_tools == {"calculator": {}}
    session_id = agent.create_session("compat")
    model.enqueue_tool_call("calculator", {"expression": "2 + 3"})
    model.enqueue_text("It is 5.")

    turn = agent.create_turn(messages=[{"role": "user", "content": "2+3?"}], session_id=session_id, stream=False)

    assert [step.step_type for step in turn.steps] == ["inference", "tool_execution", "inference"]
    assert turn.steps[1].tool_responses[0].content == "5"
    assert turn.output_message.content == "It is 5."
