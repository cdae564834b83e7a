"""Stored hosted-call items become the calls and outputs the model read (each call then its output)."""

from __future__ import annotations

from ferryman.api.content import CompletionMessage, ToolResponseMessage, UserMessage
from ferryman.api.responses import (
    CodeInterpreterCallItem,
    CodeInterpreterImage,
    CodeInterpreterLogs,
    Item,
    McpCallItem,
    McpListToolsItem,
    MessageItem,
    WebSearchAction,
    WebSearchCallItem,
)
from ferryman.services.responses.items import items_to_messages


def test_calls_join_one_assistant_message_and_each_gets_its_output() -> None:
    items: list[Item] = [
        MessageItem(role="user", content="Look it up and compute"),
        McpListToolsItem(id="mcpl_1", server_label="calc"),
        McpCallItem(id="mcp_1", server_label="calc", name="add", arguments='{"a": 1, "b": 2}', output="3"),
        WebSearchCallItem(
            id="ws_1",
            action=WebSearchAction(query="ferry", sources=[{"type": "url", "url": "https://a.example/"}]),
        ),
        CodeInterpreterCallItem(
            id="ci_1",
            code="print(1)",
            container_id="cntr_s",
            outputs=[CodeInterpreterLogs(logs="1"), CodeInterpreterImage(url="/v1/files/file-1/content")],
        ),
    ]

    user, *rest = items_to_messages(items)

    assert isinstance(user, UserMessage)
    calls = [c for m in rest if isinstance(m, CompletionMessage) for c in m.tool_calls or []]
    assert [(c.call_id, c.tool_name, c.arguments) for c in calls] == [
        ("mcp_1", "add", {"a": 1, "b": 2}),
        ("ws_1", "web_search", {"query": "ferry"}),
        ("ci_1", "code_interpreter", {"code": "print(1)"}),
    ]
    texts = {m.call_id: m.content for m in rest if isinstance(m, ToolResponseMessage)}
    assert [type(m).__name__ for m in rest] == ["CompletionMessage", "ToolResponseMessage"] * 3
    assert texts["mcp_1"] == "3"
    assert "[1] https://a.example/" in str(texts["ws_1"])
    assert texts["ci_1"] == "1\n[image] /v1/files/file-1/content"


def test_failures_read_as_the_errors_the_model_saw() -> None:
    error = {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "boom"}]}
    items: list[Item] = [
        McpCallItem(id="mcp_1", server_label="calc", name="fail", arguments="{}", error=error, status="failed"),
        CodeInterpreterCallItem(
            id="ci_1", code="1/0", container_id="cntr_s", outputs=[CodeInterpreterLogs(logs="ZeroDivisionError")]
        ).model_copy(update={"status": "failed"}),
        WebSearchCallItem(id="ws_1", status="failed", action=WebSearchAction(query="down")),
    ]

    outputs = [m.content for m in items_to_messages(items) if isinstance(m, ToolResponseMessage)]

    assert outputs[0] == "error: boom"
    assert outputs[1] == "error: ZeroDivisionError"
    assert "ended failed" in str(outputs[2])


def test_a_tool_listing_alone_becomes_nothing() -> None:
    assert items_to_messages([McpListToolsItem(id="mcpl_1", server_label="calc")]) == []
