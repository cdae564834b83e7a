"""``llama_stack_client`` 0.2.12 sees ``builtin::websearch`` as Llama Stack serves it."""

from __future__ import annotations

from llama_stack_client import LlamaStackClient


def test_the_websearch_group_lists_web_search_and_an_unconfigured_call_is_an_error_result(
    client: LlamaStackClient,
) -> None:
    """The tool is ``web_search(query)``; without a provider the result says so, with no key in it."""
    assert "builtin::websearch" in [group.identifier for group in client.toolgroups.list()]
    tools = client.tools.list(toolgroup_id="builtin::websearch")
    assert [(tool.identifier, [p.name for p in tool.parameters]) for tool in tools] == [("web_search", ["query"])]
    assert [d.name for d in client.tool_runtime.list_tools(tool_group_id="builtin::websearch")] == ["web_search"]

    result = client.tool_runtime.invoke_tool(tool_name="web_search", kwargs={"query": "ferries"})
    assert result.content is None
    assert result.error_message is not None
    assert result.error_message.startswith("web search is not configured on this server")
