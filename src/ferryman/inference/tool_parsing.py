"""Reads tool calls out of a local model's streamed text, in the forms small models emit.

:class:`ToolCallParser` turns text pieces into :class:`TextChunk` and
:class:`ToolCallChunk` items as they arrive. It recognises:

* **Tagged calls** ``<tool_call>{"name": …, "arguments": …}</tool_call>`` -- also a JSON
  list of such objects in one tag (the form SmolLM2 saw in training). A tag is a call
  whatever the name: the model was told the format, and the engine reports an unknown tool.
* **Bare JSON objects** naming an offered tool: ``{"name": …, "arguments"|"parameters": …}``,
  ``{"tool": …, …}`` or OpenAI's ``{"function": {"name": …, "arguments": …}}``.
* **JSON in code fences** (```` ```json … ``` ````), same shapes, offered tools only.
* **Function-call syntax** ``calculator(expression="2+2")`` with literal keyword
  arguments, offered tools only.

Text streams on as soon as it cannot begin one of these forms; a candidate is
held until it is complete, and becomes text again when it is not a call (prose
with JSON that names no offered tool stays prose). Anything still held when the
stream ends is flushed as text, so nothing the model wrote is lost.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
from collections.abc import Callable, Collection, Iterator
from typing import Any

from ferryman.inference.base import TextChunk, ToolCallChunk

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
FENCE = "```"
# A held candidate longer than this is not a call a small model meant: let it go as text.
MAX_HELD = 8192
# Deeper JSON is no call either; the bound is ours, not the interpreter's (json on Python 3.11 stops near 1000
# levels with a RecursionError, on 3.12 and later it parses far deeper).
MAX_NESTING = 100
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "tool_input", "input")

ParsedChunk = TextChunk | ToolCallChunk


def new_call_id() -> str:
    """Return a fresh tool-call id such as ``call_3f9a0c1d2b4e5f60``."""
    return f"call_{secrets.token_hex(8)}"


def call_of(value: Any) -> tuple[str, Any] | None:
    """Return ``(name, arguments)`` when a JSON value has the shape of one call, else None."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):
        return call_of(value["function"])
    name = value.get("name", value.get("tool"))
    if not isinstance(name, str) or not name:
        return None
    arguments: Any = next((value[key] for key in _ARGUMENT_KEYS if key in value), {})
    return name, arguments


def _bracket_depths(text: str) -> Iterator[tuple[int, int]]:
    """``(index, depth after it)`` for each JSON bracket of ``text`` outside strings."""
    depth, in_string, escaped = 0, False, False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
            yield index, depth
        elif char in "}]":
            depth -= 1
            yield index, depth


def _json_end(text: str) -> int | None:
    """Index just past the JSON object or list that starts ``text``, or None while it is open."""
    return next((index + 1 for index, depth in _bracket_depths(text) if depth == 0), None)


def _nesting(text: str) -> int:
    """How deeply the JSON ``text`` nests objects and lists (brackets inside strings do not count)."""
    return max((depth for _, depth in _bracket_depths(text)), default=0)


def _paren_end(text: str, start: int) -> int | None:
    """Index just past the ``)`` closing the ``(`` at ``start``, or None while it is open."""
    depth, quote, escaped = 0, "", False
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def function_call_of(source: str) -> tuple[str, dict[str, Any]] | None:
    """Parse ``name(key=literal, …)``; None unless every argument is a literal keyword."""
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # what model text can make the parser raise
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
        return None
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return None
        try:
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, RecursionError, MemoryError):  # TypeError: ``{[1]: 2}``
            return None
    return node.func.id, arguments


class ToolCallParser:
    """Turns streamed model text into text and tool-call chunks, one piece at a time.

    Args:
        tool_names: The offered tools; bare JSON, fenced JSON and function-call
            syntax only count as calls when they name one of them.
        call_id: Makes the id of each call; tests pass a deterministic one.

    Example:
        >>> parser = ToolCallParser(["f"], call_id=lambda: "call_1")
        >>> parser.feed('Hi <tool_call>{"name": "f", "arguments": {}}</tool')
        [TextChunk(text='Hi ', kind='text')]
        >>> parser.feed("_call>")
        [ToolCallChunk(index=0, call_id='call_1', name='f', arguments='{}', kind='tool_call')]
    """

    def __init__(self, tool_names: Collection[str] = (), call_id: Callable[[], str] = new_call_id) -> None:
        self._names = set(tool_names)
        self._call_id = call_id
        self._buffer = ""
        self._last = ""  # the last character let go as text: a name right after a word is no call
        self._triggers = [OPEN_TAG, FENCE, "{", *(f"{name}(" for name in sorted(self._names))]
        self._function_start = re.compile(
            r"(?<![\w.])(" + "|".join(re.escape(name) for name in sorted(self._names)) + r")\("
            if self._names
            else r"(?!x)x"
        )
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
        rest, self._buffer = self._buffer, ""
        return [TextChunk(rest)] if rest else []

    def _step(self, chunks: list[ParsedChunk]) -> bool:
        """Emit what the buffer allows; return True when another step may emit more."""
        start = self._candidate_start()
        if start is None:
            keep = self._partial_trigger_length()
            self._emit(chunks, len(self._buffer) - keep)
            return False
        self._emit(chunks, start)
        end, parsed = self._candidate()
        if end is None:
            if len(self._buffer) <= MAX_HELD:
                return False
            end, parsed = 1, []
        if parsed:
            chunks.extend(parsed)
            self._buffer, self._last = self._buffer[end:], ""
        else:  # a complete candidate that is not a call goes on as the text it is
            self._emit(chunks, end)
        return True

    def _emit(self, chunks: list[ParsedChunk], size: int) -> None:
        """Let the first ``size`` characters of the buffer go as text."""
        if size > 0:
            chunks.append(TextChunk(self._buffer[:size]))
            self._last, self._buffer = self._buffer[size - 1], self._buffer[size:]

    def _candidate_start(self) -> int | None:
        positions = [self._buffer.find(trigger) for trigger in (OPEN_TAG, FENCE, "{")]
        match = next(
            (m for m in self._function_start.finditer(self._buffer) if m.start() or not _is_word(self._last)), None
        )
        positions.append(match.start() if match else -1)
        found = [position for position in positions if position >= 0]
        return min(found) if found else None

    def _partial_trigger_length(self) -> int:
        """Length of the longest end of the buffer that could begin a trigger."""
        longest = max(len(trigger) for trigger in self._triggers)
        for size in range(min(len(self._buffer), longest - 1), 0, -1):
            tail = self._buffer[-size:]
            if any(trigger.startswith(tail) for trigger in self._triggers):
                before = self._buffer[-size - 1] if size < len(self._buffer) else self._last
                if tail[0].isalnum() and before and _is_word(before):
                    continue  # inside a longer word: cannot begin a tool's name
                return size
        return 0

    def _candidate(self) -> tuple[int | None, list[ParsedChunk]]:
        """``(end, chunks)`` for the candidate at the buffer's start: end None while it is incomplete."""
        buffer = self._buffer
        if buffer.startswith(OPEN_TAG):
            close = buffer.find(CLOSE_TAG)
            if close < 0:
                return None, []
            body = buffer[len(OPEN_TAG) : close]
            return close + len(CLOSE_TAG), self._from_json(body, offered_only=False)
        if buffer.startswith(FENCE):
            close = buffer.find(FENCE, len(FENCE))
            if close < 0:
                return None, []
            body = re.sub(r"^[\w-]*\n", "", buffer[len(FENCE) : close])
            body = body.strip()
            if body.startswith(OPEN_TAG) and body.endswith(CLOSE_TAG):
                return close + len(FENCE), self._from_json(body[len(OPEN_TAG) : -len(CLOSE_TAG)], False)
            return close + len(FENCE), self._from_json(body, offered_only=True)
        if buffer.startswith("{"):
            if not re.match(r"\{\s*(\"|$)", buffer):
                return 1, []
            end = _json_end(buffer)
            return (None, []) if end is None else (end, self._from_json(buffer[:end], offered_only=True))
        end = _paren_end(buffer, buffer.index("("))
        if end is None:
            return None, []
        parsed = function_call_of(buffer[:end])
        if parsed is None or parsed[0] not in self._names:
            return end, []
        return end, self._calls([parsed])

    def _from_json(self, body: str, offered_only: bool) -> list[ParsedChunk]:
        if _nesting(body) > MAX_NESTING:
            return []
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):  # ValueError: also an integer of over 4300 digits
            return []
        items = value if isinstance(value, list) else [value]
        calls = [call_of(item) for item in items]
        if not items or any(call is None for call in calls):
            return []
        found = [call for call in calls if call is not None]
        if offered_only and any(name not in self._names for name, _ in found):
            return []
        return self._calls(found)

    def _calls(self, found: list[tuple[str, Any]]) -> list[ParsedChunk]:
        """The calls ``found``, or none when one's arguments have no JSON text (bytes, sets, NaN)."""
        texts = [_arguments_text(arguments) for _, arguments in found]
        if any(text is None for text in texts):
            return []
        chunks: list[ParsedChunk] = []
        for (name, _), text in zip(found, texts, strict=True):
            chunks.append(ToolCallChunk(index=self.calls, call_id=self._call_id(), name=name, arguments=str(text)))
            self.calls += 1
        return chunks


def _arguments_text(arguments: Any) -> str | None:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError):
        return None


def _is_word(char: str) -> bool:
    return bool(char) and (char.isalnum() or char in "_.")  # "" (the output's start) is no word


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
