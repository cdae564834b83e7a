"""Translation between our messages and tools and the OpenAI chat-completions wire format."""

from __future__ import annotations

import json
from operator import is_
from typing import Any

import orjson

from ferryman.api.content import (
    CompletionMessage,
    ImageContentItem,
    InterleavedContent,
    Message,
    SystemMessage,
    TextContentItem,
    ToolDef,
    ToolResponseMessage,
    UserMessage,
    content_to_text,
)
from ferryman.api.inference import JsonSchemaResponseFormat, ResponseFormat

_JSON_TYPES = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "list": "array",
    "array": "array",
    "dict": "object",
    "object": "object",
}


def tool_schema(tool: ToolDef) -> dict[str, Any]:
    """Return the OpenAI ``tools`` entry for one tool definition."""
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema or _flat_schema(tool)}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _flat_schema(tool: ToolDef) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in tool.parameters or []:
        prop: dict[str, Any] = {"type": _JSON_TYPES.get(param.parameter_type.lower(), "string")}
        if param.description:
            prop["description"] = param.description
        if param.default is not None:
            prop["default"] = param.default
        properties[param.name] = prop
        if param.required:
            required.append(param.name)
    return {"type": "object", "properties": properties, "required": required}


def tool_choice_param(choice: str | None, tool_names: set[str]) -> Any:
    """Map our tool choice to OpenAI's; a tool name forces that tool."""
    if not choice or not tool_names:
        return None
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def response_format_param(fmt: ResponseFormat | None) -> dict[str, Any] | None:
    """Map a JSON-schema response format to OpenAI's ``response_format``."""
    if isinstance(fmt, JsonSchemaResponseFormat):
        spec: dict[str, Any] = {"name": fmt.name or "response", "schema": fmt.json_schema}
        if fmt.strict is not None:
            spec["strict"] = fmt.strict
        return {"type": "json_schema", "json_schema": spec}
    return None


def _content_parts(content: InterleavedContent) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    items = content if isinstance(content, list) else [content]
    if all(isinstance(item, TextContentItem) for item in items):
        return content_to_text(content)
    parts: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, TextContentItem):
            parts.append({"type": "text", "text": item.text})
        elif isinstance(item, ImageContentItem):
            parts.append({"type": "image_url", "image_url": {"url": _image_url(item)}})
    return parts


def _image_url(item: ImageContentItem) -> str:
    if item.image.url is not None:
        return item.image.url.uri
    return f"data:image/png;base64,{item.image.data or ''}"


def _user_message(message: UserMessage) -> dict[str, Any]:
    content = _content_parts(message.content)
    if message.context is not None:
        context = content_to_text(message.context)
        if isinstance(content, str):
            content = f"{content}\n\n{context}"
        else:
            content = [*content, {"type": "text", "text": context}]
    return {"role": "user", "content": content}


def _assistant_message(message: CompletionMessage) -> dict[str, Any]:
    text = content_to_text(message.content)
    result: dict[str, Any] = {"role": "assistant", "content": text or None}
    if message.tool_calls:
        result["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.tool_name, "arguments": call.arguments_json or "{}"},
            }
            for call in message.tool_calls
        ]
    elif not text:
        result["content"] = ""
    return result


def message_param(message: Message) -> dict[str, Any]:
    """Return the OpenAI chat message for one of ours."""
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content_to_text(message.content)}
    if isinstance(message, UserMessage):
        return _user_message(message)
    if isinstance(message, ToolResponseMessage):
        return {
            "role": "tool",
            "tool_call_id": message.call_id,
            "content": content_to_text(message.content),
        }
    return _assistant_message(message)


class EncodedMessages:
    """A request's messages encoded for the model server, the conversations sent lately kept encoded.

    A session's prompt carries its whole history on every turn, and the store hands back the same message
    objects for the rows it decoded before (``storage.codec.MessageCache``): the messages of a request after
    its first (the system message, made for each request) are mostly the previous request's, object for
    object, and a few more. Those are kept as one run of JSON, by the conversation's first message, and only
    the messages past it are made into wire forms and encoded. A message is never changed once made (the store
    shares it between turns). The runs least lately sent are forgotten once more than ``budget`` bytes are kept
    (the messages they hold stay alive with them: about twice that in memory).
    """

    def __init__(self, budget: int = 16 << 20) -> None:
        self._budget = budget
        self._kept = 0
        self._runs: dict[int, tuple[list[Message], bytes]] = {}

    def fragments(self, messages: list[Message]) -> list[orjson.Fragment]:
        """What stands for ``messages`` in a request orjson encodes: the same bytes as their :func:`message_param`
        dicts, in at most two fragments (the first message, then a run of the others, commas and all)."""
        if len(messages) < 2:
            return [orjson.Fragment(_encoded(messages))] if messages else []
        rest = messages[1:]
        key = id(rest[0])  # a run holds its first message: the id is no other's while the run is kept
        known, text = self._runs.pop(key, ([], b""))
        self._kept -= len(text)
        if known and len(known) <= len(rest) and all(map(is_, known, rest)):
            added = rest[len(known) :]
            text = b",".join((text, _encoded(added))) if added else text
        else:
            text = _encoded(rest)
        self._runs[key] = (rest, text)
        self._kept += len(text)
        while self._kept > self._budget and len(self._runs) > 1:
            self._kept -= len(self._runs.pop(next(iter(self._runs)))[1])
        return [orjson.Fragment(_encoded(messages[:1])), orjson.Fragment(text)]

    def __len__(self) -> int:
        """How many conversations' runs are kept."""
        return len(self._runs)


def _encoded(messages: list[Message]) -> bytes:
    """The JSON of ``messages``' wire forms, separated by commas, without the brackets of their list."""
    return orjson.dumps([message_param(message) for message in messages])[1:-1]


def parse_arguments(text: str) -> dict[str, Any] | str:
    """Parse tool-call arguments; keep the raw text when it is not a JSON object."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, dict) else text
