"""Models, tools and toolgroups as the server lists them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .content import InterleavedContent, ToolParameter
from .limits import Id, Name, RequiredId


class Model(BaseModel):
    """A model the server can route requests to."""

    model_config = ConfigDict(protected_namespaces=())

    identifier: str
    provider_id: str
    provider_resource_id: str
    type: Literal["model"] = "model"
    model_type: Literal["llm", "embedding"] = "llm"
    metadata: dict[str, Any] = Field(default_factory=dict)


class Tool(BaseModel):
    """A server-side tool."""

    identifier: str
    toolgroup_id: str
    provider_id: str = "builtin"
    provider_resource_id: str | None = None
    type: Literal["tool"] = "tool"
    description: str
    parameters: list[ToolParameter]
    metadata: dict[str, Any] | None = None


class McpEndpoint(BaseModel):
    """Where an MCP server listens."""

    uri: str = Field(min_length=1)


class ToolGroup(BaseModel):
    """A named group of server-side tools."""

    identifier: str
    provider_id: str = "builtin"
    provider_resource_id: str | None = None
    type: Literal["tool_group"] = "tool_group"
    args: dict[str, Any] | None = None
    mcp_endpoint: McpEndpoint | None = None


class RegisterToolGroupRequest(BaseModel):
    """Body of ``POST /toolgroups``."""

    toolgroup_id: RequiredId
    provider_id: RequiredId
    mcp_endpoint: McpEndpoint | None = None
    args: dict[str, Any] | None = None


# The wire field is named "kwargs", which the pydantic mypy plugin cannot put in a
# synthesized __init__ beside **kwargs.
class InvokeToolRequest(BaseModel):  # type: ignore[no-redef]
    """Body of ``POST /tool-runtime/invoke``."""

    tool_name: Name
    arguments: dict[str, Any] = Field(default_factory=dict, validation_alias="kwargs")


class ToolInvocationResult(BaseModel):
    """What a server-side tool returned."""

    content: InterleavedContent | None = None
    error_message: str | None = None
    error_code: int | None = None
    metadata: dict[str, Any] | None = None


class DataList(BaseModel):
    """A plain ``{"data": [...]}`` list."""

    data: list[dict[str, Any]]


class RegisterModelRequest(BaseModel):
    """Body of ``POST /models``."""

    model_config = ConfigDict(protected_namespaces=())

    model_id: RequiredId
    provider_id: Id | None = None
    provider_model_id: Id | None = None
    model_type: Literal["llm", "embedding"] = "llm"
    metadata: dict[str, Any] = Field(default_factory=dict)


class HealthStatus(BaseModel):
    """Answer to ``GET /health``."""

    status: Literal["OK"] = "OK"
