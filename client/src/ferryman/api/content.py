"""Content, messages and tool-call models shared by every API."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .limits import MAX_MESSAGE_CHARS, Id, MessageText, Name, TextAtMost


class URL(BaseModel):
    """A reference to a resource by URI."""

    uri: str


class ImageSource(BaseModel):
    """Image data inline (base64) or by URL."""

    data: str | None = None
    url: URL | None = None


class TextContentItem(BaseModel):
    """A piece of text content."""

    type: Literal["text"] = "text"
    text: MessageText


class ImageContentItem(BaseModel):
    """A piece of image content."""

    type: Literal["image"] = "image"
    image: ImageSource


ContentItem = Annotated[TextContentItem | ImageContentItem, Field(discriminator="type")]
InterleavedContent = Annotated[MessageText | ContentItem | list[ContentItem], TextAtMost(MAX_MESSAGE_CHARS)]
"""Text, a part, or parts: in a request, at most 1 MiB of text in all (one message's, one tool result's)."""


def content_to_text(content: InterleavedContent | URL | None) -> str:
    """Flatten interleaved content into plain text, dropping images."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, TextContentItem):
        return content.text
    if isinstance(content, URL | ImageContentItem):
        return ""
    return "".join(item.text for item in content if isinstance(item, TextContentItem))


ArgumentValue = Any


class ToolCall(BaseModel):
    """A call of one tool by the model.

    ``arguments`` is the parsed object when the model produced valid JSON,
    otherwise the raw text; ``arguments_json`` always holds the JSON text.
    """

    call_id: Id
    tool_name: Name
    arguments: dict[str, ArgumentValue] | MessageText
    arguments_json: str | None = None

    @model_validator(mode="after")
    def _fill_arguments_json(self) -> ToolCall:
        if self.arguments_json is None:
            if isinstance(self.arguments, str):
                self.arguments_json = self.arguments
            else:
                self.arguments_json = json.dumps(self.arguments)
        return self


StopReason = Literal["end_of_turn", "end_of_message", "out_of_tokens"]


class UserMessage(BaseModel):
    """A message from the user."""

    role: Literal["user"] = "user"
    content: InterleavedContent
    context: InterleavedContent | None = None


class SystemMessage(BaseModel):
    """System instructions."""

    role: Literal["system"] = "system"
    content: InterleavedContent


class ToolResponseMessage(BaseModel):
    """The output of one tool call, as a message."""

    role: Literal["tool"] = "tool"
    call_id: Id
    content: InterleavedContent


class CompletionMessage(BaseModel):
    """A message produced by the model."""

    role: Literal["assistant"] = "assistant"
    content: InterleavedContent
    stop_reason: StopReason = "end_of_turn"
    tool_calls: list[ToolCall] | None = Field(default_factory=list)


Message = Annotated[
    UserMessage | SystemMessage | ToolResponseMessage | CompletionMessage,
    Field(discriminator="role"),
]
TurnInputMessage = Annotated[UserMessage | ToolResponseMessage, Field(discriminator="role")]


class ToolResponse(BaseModel):
    """The result of one tool call, as sent by a client or produced by a server tool."""

    call_id: Id
    tool_name: Name
    content: InterleavedContent
    metadata: dict[str, Any] | None = None


class ToolParameter(BaseModel):
    """One parameter of a tool, in Llama Stack's flat form."""

    name: Name
    parameter_type: str
    description: str = ""
    required: bool = True
    default: Any = None


class ToolDef(BaseModel):
    """A tool definition: name, description, parameters."""

    model_config = ConfigDict(extra="allow")

    name: Name
    description: MessageText | None = None
    parameters: list[ToolParameter] | None = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    input_schema: dict[str, Any] | None = None
    """A full JSON schema of the arguments; when set it is used instead of ``parameters``."""
