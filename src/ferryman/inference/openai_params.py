"""OpenAI's chat-completions request, as the adapter reads it, validated before anything is built from it.

Only the fields that a provider of ours reads are modelled; the others (``n``,
``seed``, a message's ``name``…) are ignored here, as before. Parts, tools and
formats of a kind no provider of ours reads (an audio part, a refusal, a
non-function tool) are kept out of the request, as before; a value of the wrong
shape is refused with 400, naming its field (``messages.0.tool_calls.0.id``).
Remote OpenAI-compatible providers get the request as it is, unread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, FiniteFloat, Tag, ValidationError
from pydantic_core import ErrorDetails

from ferryman.api.limits import ENFORCED, MAX_MESSAGE_CHARS, Id, MessageText, Name, TextAtMost
from ferryman.errors import InvalidRequestError


class _Param(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def _kind(key: str, known: Mapping[str, str], other: str) -> Callable[[Any], str]:
    """A discriminator: the tag of a value's ``key`` (a raw object's or a model's), ``other`` when unknown."""

    def tag(value: Any) -> str:
        found = value.get(key) if isinstance(value, dict) else getattr(value, key, None)
        return known.get(found, other) if isinstance(found, str) else other

    return tag


# Tags hold a space: no field is named so, and the error's field path leaves them out.


class TextPart(_Param):
    """A text part of a message's content."""

    type: Literal["text"]
    text: MessageText


class ImageUrl(_Param):
    """Where an image part's image is (a URL or a ``data:`` URL)."""

    url: str


class ImagePart(_Param):
    """An image part of a user message's content."""

    type: Literal["image_url"]
    image_url: ImageUrl


class OtherPart(_Param):
    """A part of a kind no provider of ours reads (audio, a file, a refusal): left out."""

    type: str


Part = Annotated[
    Annotated[TextPart, Tag("text part")] | Annotated[ImagePart, Tag("image part")] | Annotated[OtherPart, Tag("part")],
    Discriminator(_kind("type", {"text": "text part", "image_url": "image part"}, "part")),
]
Content = Annotated[str | list[Part], TextAtMost(MAX_MESSAGE_CHARS)]
"""A message's content: text, or parts."""


def content_text(content: Content | None) -> str:
    """The text of a message's content (parts of other kinds left out)."""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content or [] if isinstance(part, TextPart))


class SystemParam(_Param):
    """A system (or developer) message."""

    role: Literal["system", "developer"]
    content: Content | None = None


class UserParam(_Param):
    """A user message."""

    role: Literal["user"]
    content: Content | None = None


class FunctionCallParam(_Param):
    """The function a tool call calls, and its arguments (JSON text)."""

    name: Name
    arguments: str | None = None


class ToolCallParam(_Param):
    """One tool call of an assistant message."""

    id: Id
    type: Literal["function"] = "function"
    function: FunctionCallParam


class AssistantParam(_Param):
    """An assistant message, with the tool calls it made."""

    role: Literal["assistant"]
    content: Content | None = None
    tool_calls: list[ToolCallParam] | None = None


class ToolParam(_Param):
    """A tool's answer to a call."""

    role: Literal["tool"]
    tool_call_id: Id
    content: Content | None = None


class UnknownRoleParam(_Param):
    """A message of no known role: its ``role`` is refused."""

    role: Literal["system", "developer", "user", "assistant", "tool"]


MessageParam = Annotated[
    Annotated[SystemParam, Tag("system message")]
    | Annotated[UserParam, Tag("user message")]
    | Annotated[AssistantParam, Tag("assistant message")]
    | Annotated[ToolParam, Tag("tool message")]
    | Annotated[UnknownRoleParam, Tag("message")],
    Discriminator(
        _kind(
            "role",
            {
                "system": "system message",
                "developer": "system message",
                "user": "user message",
                "assistant": "assistant message",
                "tool": "tool message",
            },
            "message",
        )
    ),
]


class FunctionDefParam(_Param):
    """A function tool's definition."""

    name: Name
    description: MessageText | None = None
    parameters: dict[str, Any] | None = None


class FunctionToolParam(_Param):
    """A function tool."""

    type: Literal["function"]
    function: FunctionDefParam


class OtherToolParam(_Param):
    """A tool of a kind no provider of ours runs: left out."""

    type: str


ToolDefParam = Annotated[
    Annotated[FunctionToolParam, Tag("function tool")] | Annotated[OtherToolParam, Tag("tool")],
    Discriminator(_kind("type", {"function": "function tool"}, "tool")),
]


class NamedFunctionParam(_Param):
    """The function a tool choice names."""

    name: Name


class NamedToolChoiceParam(_Param):
    """A tool choice naming one function."""

    function: NamedFunctionParam


class TextFormatParam(_Param):
    """Plain text output."""

    type: Literal["text"]


class JsonObjectFormatParam(_Param):
    """Any JSON object as output."""

    type: Literal["json_object"]


class JsonSchemaParam(_Param):
    """The schema a JSON output follows."""

    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


class JsonSchemaFormatParam(_Param):
    """JSON output following a schema."""

    type: Literal["json_schema"]
    json_schema: JsonSchemaParam | None = None


class UnknownFormatParam(_Param):
    """A response format of no known type: its ``type`` is refused."""

    type: Literal["text", "json_object", "json_schema"]


FormatParam = Annotated[
    Annotated[TextFormatParam, Tag("text format")]
    | Annotated[JsonObjectFormatParam, Tag("json object format")]
    | Annotated[JsonSchemaFormatParam, Tag("json schema format")]
    | Annotated[UnknownFormatParam, Tag("format")],
    Discriminator(
        _kind(
            "type",
            {"text": "text format", "json_object": "json object format", "json_schema": "json schema format"},
            "format",
        )
    ),
]


class ChatParams(_Param):
    """The fields of a chat-completions request that a provider of ours reads (``max_tokens`` aside)."""

    messages: list[MessageParam] | None = None
    tools: list[ToolDefParam] | None = None
    tool_choice: str | NamedToolChoiceParam | None = None
    response_format: FormatParam | None = None
    stop: str | list[str] | None = None
    temperature: FiniteFloat | None = None
    top_p: FiniteFloat | None = None
    top_k: int | None = None


def parse_chat_params(body: Mapping[str, Any]) -> ChatParams:
    """Validate a chat-completions request, held to the request limits.

    Raises:
        InvalidRequestError: a field has the wrong shape or is over its maximum (the error names it).
    """
    try:
        return ChatParams.model_validate(body, context=ENFORCED)
    except ValidationError as exc:
        raise _invalid(exc) from exc


def _fields(model: type[BaseModel]) -> Iterator[str]:
    for name, field in model.model_fields.items():
        yield field.alias or name


_FIELDS = frozenset(
    name
    for model in (
        TextPart,
        ImageUrl,
        ImagePart,
        OtherPart,
        SystemParam,
        UserParam,
        FunctionCallParam,
        ToolCallParam,
        AssistantParam,
        ToolParam,
        UnknownRoleParam,
        FunctionDefParam,
        FunctionToolParam,
        OtherToolParam,
        NamedFunctionParam,
        NamedToolChoiceParam,
        TextFormatParam,
        JsonObjectFormatParam,
        JsonSchemaParam,
        JsonSchemaFormatParam,
        UnknownFormatParam,
        ChatParams,
    )
    for name in _fields(model)
)


def _path(error: ErrorDetails) -> list[str]:
    """The field an error is about: its location without the union members and tags pydantic adds."""
    return [str(part) for part in error["loc"] if isinstance(part, int) or part in _FIELDS]


def _invalid(exc: ValidationError) -> InvalidRequestError:
    # A value tried against a union fails each member: the member that got furthest, or that
    # failed on more than the value's type (a text too long), is the one the caller meant.
    errors = exc.errors(include_url=False)
    first = max(errors, key=lambda error: (not error["type"].endswith("_type"), len(_path(error))))
    path = _path(first)
    # A value of none of a union's types (``stop: 5``): name every type the field takes.
    expected = dict.fromkeys(_EXPECTED[e["type"]] for e in errors if _path(e) == path and e["type"] in _EXPECTED)
    message = f"must be {' or '.join(expected)}" if first["type"] in _EXPECTED else first["msg"]
    field = ".".join(path)
    return InvalidRequestError(f"invalid field '{field}': {message}", field=field)


_EXPECTED = {
    "string_type": "a string",
    "list_type": "a list",
    "model_type": "a JSON object",
    "dict_type": "a JSON object",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
}
