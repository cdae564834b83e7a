"""A prompted tool-call format for models without native tool calling.

Small local models (SmolLM2 among them) have no tool-calling head and their
chat templates know no ``tool`` role. The embedded provider therefore offers
tools in the system prompt and reads calls back out of the plain text:

* **Offer.** :func:`tool_system_prompt` lists each tool as its OpenAI-style JSON
  schema (one per line) and asks the model to answer, when it wants a tool,
  with exactly one tag per call::

      <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>

  The text is appended to the first system message, or becomes one.
* **Parse.** :class:`ToolCallParser` reads the streamed output. Text outside
  tags streams as soon as it cannot be the start of ``<tool_call>``; a tag's
  body is held until ``</tool_call>`` and then becomes one complete
  :class:`ToolCallChunk` (a fresh ``call_<hex>`` id, the name, the arguments as
  JSON text). A JSON list of such objects in one tag (the form SmolLM2 saw in
  training) is accepted as several calls. A body that is not a JSON object
  with a string ``name`` is not a call: the whole tag is passed on as text, so
  nothing the model wrote is lost.
  An ``arguments`` string is passed on raw (the engine reports it as a failed
  parse). A tag still open when the stream ends is flushed as text too.
* **History.** :func:`render_history` rewrites earlier turns into roles the
  template knows: an assistant message with tool calls becomes its text
  followed by the ``<tool_call>`` tags it would have produced, and a tool result
  becomes a user message starting ``Tool result for call <id>:``. Image parts
  are dropped: the model reads text only.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

from ferryman.api.content import Message
from ferryman.inference.base import TextChunk, ToolCallChunk
from ferryman.inference.openai_wire import message_param, parse_arguments

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
TOOL_RESULT_PREFIX = "Tool result for call"

_INSTRUCTIONS = """\
You can call tools. Each tool is described by a JSON schema:
{schemas}

To call a tool, reply with exactly
<tool_call>{{"name": "<tool name>", "arguments": {{<arguments as a JSON object>}}}}</tool_call>
Write one <tool_call> block per call and nothing inside it but that JSON. \
Tool results come back in a user message that starts with "{prefix} <id>:". \
{choice}"""

ParsedChunk = TextChunk | ToolCallChunk


def new_call_id() -> str:
    """Return a fresh tool-call id such as ``call_3f9a0c1d2b4e5f60``."""
    return f"call_{secrets.token_hex(8)}"


def tool_system_prompt(schemas: list[dict[str, Any]], tool_choice: str | None = None) -> str:
    """Return the system-prompt text that offers tools in the ``<tool_call>`` format.

    Args:
        schemas: OpenAI ``tools`` entries, as :func:`~ferryman.inference.openai_wire.tool_schema` builds them.
        tool_choice: ``auto`` (or None), ``required``, or the name of the tool that must be called.
    """
    if tool_choice in (None, "auto", "none"):
        choice = "If no tool is needed, answer the user directly."
    elif tool_choice == "required":
        choice = "You must call at least one tool."
    else:
        choice = f"You must call the tool {tool_choice}."
    lines = "\n".join(json.dumps(schema) for schema in schemas)
    return _INSTRUCTIONS.format(schemas=lines, prefix=TOOL_RESULT_PREFIX, choice=choice)


def add_system_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """Append ``text`` to the first system message, or put a new one first."""
    if messages and messages[0]["role"] == "system":
        first = {**messages[0], "content": f"{messages[0]['content']}\n\n{text}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def render_history(messages: list[Message]) -> list[dict[str, Any]]:
    """Return our messages as plain ``{"role", "content"}`` dicts a ChatML template accepts."""
    return [_render(message_param(message)) for message in messages]


def tool_call_text(name: str, arguments_json: str) -> str:
    """Return the ``<tool_call>`` tag that stands for one call."""
    body = {"name": name, "arguments": parse_arguments(arguments_json)}
    return f"{OPEN_TAG}{json.dumps(body)}{CLOSE_TAG}"


def _render(param: dict[str, Any]) -> dict[str, Any]:
    content = _text_of(param.get("content"))
    if param["role"] == "tool":
        return {"role": "user", "content": f"{TOOL_RESULT_PREFIX} {param['tool_call_id']}:\n{content}"}
    calls = [
        tool_call_text(call["function"]["name"], call["function"]["arguments"]) for call in param.get("tool_calls", [])
    ]
    if calls:
        content = "\n".join([content, *calls] if content else calls)
    return {"role": param["role"], "content": content}


def _text_of(content: str | list[dict[str, Any]] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part["text"] for part in content if part.get("type") == "text")


class ToolCallParser:
    """Turns streamed model text into text and tool-call chunks, one piece at a time.

    Args:
        call_id: Makes the id of each call; tests pass a deterministic one.

    Example:
        >>> parser = ToolCallParser(call_id=lambda: "call_1")
        >>> parser.feed('Hi <tool_call>{"name": "f", "arguments": {}}</tool')
        [TextChunk(text='Hi ', kind='text')]
        >>> parser.feed("_call>")
        [ToolCallChunk(index=0, call_id='call_1', name='f', arguments='{}', kind='tool_call')]
    """

    def __init__(self, call_id: Callable[[], str] = new_call_id) -> None:
        self._call_id = call_id
        self._buffer = ""
        self._inside = False
        self.calls = 0

    def feed(self, text: str) -> list[ParsedChunk]:
        """Consume more model output; return what can be emitted now."""
        self._buffer += text
        chunks: list[ParsedChunk] = []
        while self._step(chunks):
            pass
        return _merge_text(chunks)

    def finish(self) -> list[ParsedChunk]:
        """Flush what is held at the end of the stream, as text."""
        rest = (OPEN_TAG if self._inside else "") + self._buffer
        self._buffer, self._inside = "", False
        return [TextChunk(rest)] if rest else []

    def _step(self, chunks: list[ParsedChunk]) -> bool:
        """Emit what the buffer allows; return True when another step may emit more."""
        if self._inside:
            end = self._buffer.find(CLOSE_TAG)
            if end < 0:
                return False
            body, self._buffer = self._buffer[:end], self._buffer[end + len(CLOSE_TAG) :]
            self._inside = False
            chunks.extend(self._calls_or_text(body))
            return True
        start = self._buffer.find(OPEN_TAG)
        if start >= 0:
            chunks.append(TextChunk(self._buffer[:start]))
            self._buffer, self._inside = self._buffer[start + len(OPEN_TAG) :], True
            return True
        keep = _partial_tag_length(self._buffer)
        cut = len(self._buffer) - keep
        chunks.append(TextChunk(self._buffer[:cut]))
        self._buffer = self._buffer[cut:]
        return False

    def _calls_or_text(self, body: str) -> list[ParsedChunk]:
        try:
            value = json.loads(body)
        except json.JSONDecodeError:
            value = None
        calls = value if isinstance(value, list) else [value]
        if not calls or not all(isinstance(call, dict) and isinstance(call.get("name"), str) for call in calls):
            return [TextChunk(f"{OPEN_TAG}{body}{CLOSE_TAG}")]
        return [self._call(call["name"], call.get("arguments", {})) for call in calls]

    def _call(self, name: str, arguments: Any) -> ToolCallChunk:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        chunk = ToolCallChunk(index=self.calls, call_id=self._call_id(), name=name, arguments=text)
        self.calls += 1
        return chunk


def _partial_tag_length(text: str) -> int:
    """Length of the longest end of ``text`` that could begin the opening tag."""
    for size in range(min(len(text), len(OPEN_TAG) - 1), 0, -1):
        if OPEN_TAG.startswith(text[-size:]):
            return size
    return 0


def _merge_text(chunks: list[ParsedChunk]) -> list[ParsedChunk]:
    merged: list[ParsedChunk] = []
    for chunk in chunks:
        if isinstance(chunk, TextChunk):
            if not chunk.text:
                continue
            if merged and isinstance(merged[-1], TextChunk):
                merged[-1] = TextChunk(merged[-1].text + chunk.text)
                continue
        merged.append(chunk)
    return merged
