"""MCP listings and results in ferryman's terms, and what an endpoint shows of itself."""

from __future__ import annotations

import base64

import mcp_types

from ferryman.api.content import TextContentItem
from ferryman.tools.mcp import McpEndpoint, redacted_url
from ferryman.tools.mcp.convert import invocation_result, parameters, tool_def


def test_schema_properties_become_flat_parameters() -> None:
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to find"},
            "limit": {"type": ["integer", "null"], "default": 5},
            "mode": {"anyOf": [{"type": "null"}, {"type": "string"}], "title": "Mode"},
            "filters": {"$ref": "#/$defs/Filters"},
        },
        "required": ["query"],
    }
    assert [(p.name, p.parameter_type, p.required, p.description, p.default) for p in parameters(schema)] == [
        ("query", "string", True, "What to find", None),
        ("limit", "integer", False, "", 5),
        ("mode", "string", False, "Mode", None),
        ("filters", "object", False, "", None),
    ]
    assert parameters({"type": "object"}) == []


def test_a_listed_tool_keeps_its_raw_schema() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
    tool = tool_def(mcp_types.Tool(name="scale", title="Scale it", input_schema=schema))
    assert (tool.name, tool.description, tool.input_schema) == ("scale", "Scale it", schema)
    assert tool.metadata is None


def test_a_listed_tool_keeps_its_annotations() -> None:
    hints = mcp_types.ToolAnnotations(read_only_hint=True, destructive_hint=False)
    tool = tool_def(mcp_types.Tool(name="look", input_schema={"type": "object"}, annotations=hints))
    assert tool.metadata == {"annotations": {"readOnlyHint": True, "destructiveHint": False}}


def test_results_convert_every_content_kind() -> None:
    blob = base64.b64encode(b"\x00" * 10).decode()
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="hello"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.BlobResourceContents(uri="file://a.bin", mime_type="application/zip", blob=blob),
            ),
            mcp_types.ResourceLink(type="resource_link", name="readme", uri="file://README"),
            mcp_types.AudioContent(type="audio", data=blob, mime_type="audio/wav"),
        ]
    )
    converted = invocation_result(result)
    assert converted.error_message is None
    assert isinstance(converted.content, list)
    assert [item.text for item in converted.content if isinstance(item, TextContentItem)] == [
        "hello",
        "[resource file://a.bin: application/zip, 10 bytes]",
        "[resource readme: file://README]",
        "[audio/wav audio, 10 bytes]",
    ]


def test_structured_content_alone_becomes_json_text() -> None:
    converted = invocation_result(mcp_types.CallToolResult(content=[], structured_content={"sum": 3}))
    assert converted.content == [TextContentItem(text='{"sum": 3}')]


def test_an_error_result_carries_its_text_as_the_message() -> None:
    failed = invocation_result(
        mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="boom")], is_error=True)
    )
    silent = invocation_result(mcp_types.CallToolResult(content=[], is_error=True))
    assert failed.error_message == "boom"
    assert silent.error_message and silent.content is None


def test_an_endpoint_hides_its_credentials() -> None:
    endpoint = McpEndpoint("https://me:pw@mcp.example.com:8443/mcp?token=t#frag", "sse", {"Authorization": "Bearer k"})
    assert "Bearer k" not in repr(endpoint) and "pw" not in endpoint.display_url
    assert endpoint.display_url == "https://mcp.example.com:8443/mcp"
    assert redacted_url("http://[::1]:9000/sse") == "http://[::1]:9000/sse"


def test_endpoints_share_a_pool_key_only_with_the_same_credentials() -> None:
    one = McpEndpoint("https://mcp.example.com/mcp", "auto", {"Authorization": "a"})
    same = McpEndpoint("https://mcp.example.com/mcp", "auto", {"authorization": "a"})
    other = McpEndpoint("https://mcp.example.com/mcp", "auto", {"Authorization": "b"})
    assert one.key == same.key != other.key
