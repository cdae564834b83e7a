"""MCP tool listings and tool results in ferryman's terms."""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

from ferryman.api.content import (
    ContentItem,
    ImageContentItem,
    ImageSource,
    TextContentItem,
    ToolDef,
    ToolParameter,
    content_to_text,
)
from ferryman.api.registry import ToolInvocationResult

if TYPE_CHECKING:
    # Imported where a result is converted: the Responses ``mcp`` tool imports this module for its listings'
    # parameters, and the SDK's types (about 10 MiB) load only once an MCP server has answered.
    import mcp_types

ANNOTATIONS = "annotations"
"""The key of a listed tool's ``metadata`` holding its MCP annotations (``readOnlyHint`` …) as the server sent them."""


def tool_def(tool: mcp_types.Tool) -> ToolDef:
    """An MCP tool as a tool definition: flat parameters, the raw JSON schema beside them, its annotations.

    The annotations are hints the server gives (``readOnlyHint``, ``destructiveHint`` …); the
    Responses ``mcp`` tool's ``allowed_tools.read_only`` filter reads them.
    """
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
    return ToolDef(
        name=tool.name,
        description=tool.description or tool.title,
        parameters=parameters(tool.input_schema),
        input_schema=tool.input_schema,
        metadata={ANNOTATIONS: annotations} if annotations else None,
    )


def parameters(schema: dict[str, Any]) -> list[ToolParameter]:
    """The top-level properties of a JSON schema as Llama Stack's flat parameters."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    required = set(schema.get("required") or [])
    return [
        ToolParameter(
            name=name,
            parameter_type=_type_name(spec),
            description=str(spec.get("description") or spec.get("title") or ""),
            required=name in required,
            default=spec.get("default"),
        )
        for name, spec in properties.items()
        if isinstance(spec, dict)
    ]


def _type_name(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), None)
    if isinstance(kind, str):
        return kind
    for alternative in spec.get("anyOf") or spec.get("oneOf") or []:
        if isinstance(alternative, dict) and alternative.get("type") not in (None, "null"):
            return _type_name(alternative)
    return "object"


def invocation_result(result: mcp_types.CallToolResult) -> ToolInvocationResult:
    """An MCP tool's result; one the server marked as an error carries its text as the error message."""
    items = [item for block in result.content for item in _content(block)]
    if not items and result.structured_content is not None:
        items = [TextContentItem(text=json.dumps(result.structured_content))]
    if result.is_error:
        message = content_to_text(items) or "the MCP tool failed without saying why"
        return ToolInvocationResult(content=items or None, error_message=message)
    return ToolInvocationResult(content=items)


def _content(block: mcp_types.ContentBlock) -> list[ContentItem]:
    import mcp_types

    if isinstance(block, mcp_types.TextContent):
        return [TextContentItem(text=block.text)]
    if isinstance(block, mcp_types.ImageContent):
        return [ImageContentItem(image=ImageSource(data=block.data))]
    if isinstance(block, mcp_types.EmbeddedResource):
        return [TextContentItem(text=_resource_text(block.resource))]
    if isinstance(block, mcp_types.ResourceLink):
        return [TextContentItem(text=f"[resource {block.name}: {block.uri}]")]
    if isinstance(block, mcp_types.AudioContent):
        return [TextContentItem(text=f"[{block.mime_type} audio, {_decoded_size(block.data)} bytes]")]
    return []


def _resource_text(resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents) -> str:
    import mcp_types

    if isinstance(resource, mcp_types.TextResourceContents):
        return resource.text
    kind = resource.mime_type or "binary"
    return f"[resource {resource.uri}: {kind}, {_decoded_size(resource.blob)} bytes]"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return len(data)
