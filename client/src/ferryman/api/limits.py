"""The largest values a request may carry, declared once, and the annotations that hold requests to them.

A caller's request is validated with :data:`ENFORCED` as its validation context
(``ferryman.server.http.parse_body`` does it): a value over its maximum is refused
there, naming the field and the maximum. The same models also read back what the
server stored and carry what it builds itself (a model's answer, a tool's result);
those are never re-checked, so a record stored before a limit existed (or was
lowered) stays readable. The JSON schema of a request (``validation`` mode, the
OpenAPI document's request bodies) shows each maximum (``maxLength``, ``maxItems``,
``maxProperties``, ``pattern``); answers are not bounded by them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import Field, GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

MAX_ID_CHARS = 256
"""An id a caller sends or chooses (an agent's, a shield's, a model's, a file's…), in a body, a path or a query."""
MAX_NAME_CHARS = 256
"""A name a caller gives (an agent's, a session's, a vector store's, a tool's, a file's)."""
MAX_METADATA_KEYS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
"""Metadata and attributes as OpenAI bounds them: 16 keys of at most 64 characters, string values of at most 512."""
MAX_INSTRUCTIONS_CHARS = 1024 * 1024
"""An agent's or a response's instructions."""
MAX_MESSAGE_CHARS = 1024 * 1024
"""The text of one message, one content part, one tool result or one document (larger documents: upload a file)."""
MAX_SEARCH_QUERY_CHARS = 4096
"""One search query (a vector store search, a vector-io or RAG tool query)."""
MAX_DOCUMENTS = 20
"""Documents attached to one turn."""
MAX_MESSAGES = 1000
"""Messages (or items, tool results, approvals) in one request."""
MAX_TOOLS = 128
"""Tools, toolgroups or client tools in one agent config, turn or response (OpenAI's limit)."""
MAX_SHIELDS = 32
"""Shields (guardrails) named in one agent config or response."""
MAX_FILES_PER_REQUEST = 500
"""Files attached to a vector store in one request."""
MAX_CHUNKS_PER_INSERT = 1000
"""Chunks inserted into a vector DB in one request."""

_KEY = "ferryman_limits"
ENFORCED: Mapping[str, Any] = MappingProxyType({_KEY: True})
"""The validation context under which the limits hold: a caller's request."""

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
NO_CONTROL_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
"""The JSON schema of the rule :func:`has_control_character` checks (ECMA-262 syntax)."""


def has_control_character(text: str) -> bool:
    """Whether ``text`` holds a control character: C0 (NUL included), DEL or C1."""
    return _CONTROL.search(text) is not None


def _enforced(info: ValidationInfo) -> bool:
    context = info.context
    return isinstance(context, Mapping) and bool(context.get(_KEY))


_MAX_KEYWORD = {"string": "maxLength", "array": "maxItems", "object": "maxProperties"}


@dataclass(frozen=True)
class AtMost:
    """A request's string, list or object holds at most ``most`` characters, items or keys."""

    most: int

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """The wrapped type's schema, checked afterwards."""
        return core_schema.with_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The wrapped type's JSON schema with its maximum, in a request's schema."""
        json_schema = handler(schema)
        keyword = _MAX_KEYWORD.get(json_schema.get("type", ""))
        if handler.mode == "validation" and keyword is not None:
            json_schema[keyword] = min(self.most, json_schema.get(keyword, self.most))
        return json_schema

    def _check(self, value: Any, info: ValidationInfo) -> Any:
        if _enforced(info) and len(value) > self.most:
            unit = "characters" if isinstance(value, str) else "keys" if isinstance(value, dict) else "items"
            raise PydanticCustomError(
                "too_long",
                "at most {most} {unit} (got {length})",
                {"most": self.most, "unit": unit, "length": len(value)},
            )
        return value


@dataclass(frozen=True)
class NoControlCharacters:
    """A request's string holds no control character (see :func:`has_control_character`)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """The wrapped type's schema, checked afterwards."""
        return core_schema.with_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The wrapped type's JSON schema with the rule as a pattern, in a request's schema."""
        json_schema = handler(schema)
        if handler.mode == "validation" and "pattern" not in json_schema:
            json_schema["pattern"] = NO_CONTROL_PATTERN
        return json_schema

    def _check(self, value: str, info: ValidationInfo) -> str:
        if _enforced(info) and has_control_character(value):
            raise PydanticCustomError(
                "control_character", "must not contain control characters (U+0000-U+001F, U+007F-U+009F)"
            )
        return value


def _text_length(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_text_length(item) for item in value)
    text = getattr(value, "text", getattr(value, "refusal", None))  # a part's text, or a refusal's
    return len(text) if isinstance(text, str) else 0


@dataclass(frozen=True)
class TextAtMost:
    """A request's content (a string, a text part, or a list of parts) holds at most ``most`` characters of text."""

    most: int

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """The wrapped type's schema, checked afterwards."""
        return core_schema.with_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The wrapped type's JSON schema, saying the maximum (no JSON schema keyword counts text across parts)."""
        json_schema = handler(schema)
        if handler.mode == "validation":
            json_schema["description"] = f"At most {self.most} characters of text in all."
        return json_schema

    def _check(self, value: Any, info: ValidationInfo) -> Any:
        if not _enforced(info):
            return value
        length = _text_length(value)
        if length > self.most:
            raise PydanticCustomError(
                "too_long", "at most {most} characters of text (got {length})", {"most": self.most, "length": length}
            )
        return value


Id = Annotated[str, AtMost(MAX_ID_CHARS), NoControlCharacters()]
"""An id: at most 256 characters, no control character."""
RequiredId = Annotated[str, Field(min_length=1), AtMost(MAX_ID_CHARS), NoControlCharacters()]
"""An id that may not be empty."""
Name = Annotated[str, AtMost(MAX_NAME_CHARS), NoControlCharacters()]
"""A name: at most 256 characters, no control character."""
Instructions = Annotated[str, AtMost(MAX_INSTRUCTIONS_CHARS)]
"""Instructions: at most 1 MiB of characters."""
MessageText = Annotated[str, AtMost(MAX_MESSAGE_CHARS)]
"""The text of one message or content part: at most 1 MiB of characters."""
SearchText = Annotated[str, AtMost(MAX_SEARCH_QUERY_CHARS)]
"""One search query: at most 4096 characters."""
MetadataKey = Annotated[str, AtMost(MAX_METADATA_KEY_CHARS)]
Metadata = Annotated[dict[MetadataKey, Annotated[str, AtMost(MAX_METADATA_VALUE_CHARS)]], AtMost(MAX_METADATA_KEYS)]
"""OpenAI's metadata: at most 16 string values of at most 512 characters, under keys of at most 64."""
AttributeValue = Annotated[str, AtMost(MAX_METADATA_VALUE_CHARS)] | float | bool
Attributes = Annotated[dict[MetadataKey, AttributeValue], AtMost(MAX_METADATA_KEYS)]
"""A vector store file's attributes: metadata whose values may also be numbers or booleans."""
