"""GBNF grammars that keep a local model's tool calls well-formed.

When tools are offered, the embedded provider passes :func:`tool_call_grammar`
to the token source as ``params["grammar"]`` (llama.cpp's GBNF). The grammar
admits a tool call in the two shapes small models use -- tagged
``<tool_call>{"name": …, "arguments": …}</tool_call>`` or the bare JSON object,
with ``arguments`` or ``parameters`` as the key -- where the name is one of the
offered tools and the arguments follow that tool's JSON schema.

With ``tool_choice`` ``auto`` the grammar also admits free text: llama.cpp has
no lazy grammar here, so the first character decides. An answer that starts
with ``{`` or ``<`` must be a complete call; one that starts with anything else
is free text. ``required`` admits only a call, and a tool's name admits only a
call of that tool.

The JSON-schema translation is our own, so it needs no inference runtime: it
covers objects (required properties in order, then optional ones), strings,
numbers, integers, booleans, null, arrays, ``enum``, ``const``, ``anyOf``/
``oneOf`` and type lists; anything else (``$ref``, patterns) admits any JSON
value of the right shape.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .tool_parsing import CLOSE_TAG, OPEN_TAG

_BASE_RULES = {
    "ws": r"[ \t\n]{0,8}",
    "string": r'"\"" char* "\""',
    "char": r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "integer": r'"-"? ([0-9] | [1-9] [0-9]{0,15})',
    "number": r'integer ("." [0-9]+)? ([eE] [-+]? [0-9]+)?',
    "boolean": r'"true" | "false"',
    "null": r'"null"',
    "value": r"object | array | string | number | boolean | null",
    "object": r'"{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"',
    "array": r'"[" ws ( value ( ws "," ws value )* )? ws "]"',
}
_TYPE_RULES = {"string", "integer", "number", "boolean", "null", "object", "array"}
# Free text may not begin like a call, so a call is always a complete one.
_TEXT_RULE = r"[^{< \t\n] [^\x00]*"


def literal(text: str) -> str:
    """Return a GBNF string literal matching ``text`` exactly."""
    return json.dumps(text, ensure_ascii=False)


class _Grammar:
    """Collects named rules; a schema becomes one rule per node."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = dict(_BASE_RULES)

    def add(self, name: str, body: str) -> str:
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-") or "rule"
        unique, n = name, 1
        while unique in self.rules:
            n += 1
            unique = f"{name}-{n}"
        self.rules[unique] = body
        return unique

    def schema(self, schema: Any, name: str) -> str:
        """Return a rule name (or inline expression) matching values of ``schema``."""
        if not isinstance(schema, dict):
            return "value"
        if "const" in schema:
            return literal(json.dumps(schema["const"]))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self.add(name, " | ".join(literal(json.dumps(item)) for item in schema["enum"]))
        alternatives = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(alternatives, list) and alternatives:
            parts = [self.schema(alt, f"{name}-{i}") for i, alt in enumerate(alternatives)]
            return self.add(name, " | ".join(parts))
        kind = schema.get("type")
        if isinstance(kind, list):
            parts = [self.schema({**schema, "type": item}, f"{name}-{item}") for item in kind]
            return self.add(name, " | ".join(parts))
        if kind == "object" and isinstance(schema.get("properties"), dict) and schema["properties"]:
            return self._object(schema, name)
        if kind == "array" and isinstance(schema.get("items"), dict):
            item = self.schema(schema["items"], f"{name}-item")
            return self.add(name, f'"[" ws ( {item} ( ws "," ws {item} )* )? ws "]"')
        if kind == "object" and "properties" not in schema and name.endswith("-args"):
            return self.add(name, '"{" ws "}"')
        return kind if kind in _TYPE_RULES else "value"

    def _object(self, schema: dict[str, Any], name: str) -> str:
        properties: dict[str, Any] = schema["properties"]
        required = [key for key in schema.get("required", []) if key in properties]
        optional = [key for key in properties if key not in required]
        pairs = {
            key: f'{literal(json.dumps(key))} ws ":" ws {self.schema(properties[key], f"{name}-{key}")}'
            for key in properties
        }
        body = ' ws "," ws '.join(pairs[key] for key in required)
        tail = self._optional_tail([pairs[key] for key in optional], name)
        if tail and body:
            body = f'{body} ( ws "," ws {tail} )?'
        elif tail:
            body = f"( {tail} )?"
        return self.add(name, f'"{{" ws {body} ws "}}"')

    def _optional_tail(self, pairs: list[str], name: str) -> str | None:
        """A rule for one or more of ``pairs`` in order, comma-separated (linear in their number)."""
        following: str | None = None
        for index in range(len(pairs) - 1, -1, -1):
            pair = pairs[index]
            body = f'{pair} ( ws "," ws {following} )? | {following}' if following else pair
            following = self.add(f"{name}-opt{index}", body)
        return following

    def text(self) -> str:
        return "\n".join(f"{name} ::= {body}" for name, body in self.rules.items()) + "\n"


def _function(schema: dict[str, Any]) -> dict[str, Any]:
    function = schema.get("function", schema)
    return function if isinstance(function, dict) else {}


def answer_grammar() -> str:
    """Return the GBNF grammar of a plain answer: free text that does not begin like a call."""
    return f"root ::= ws text\nws ::= {_BASE_RULES['ws']}\ntext ::= {_TEXT_RULE}\n"


def tool_call_grammar(schemas: list[dict[str, Any]], tool_choice: str | None = "auto") -> str:
    """Return the GBNF grammar for an answer when ``schemas`` are offered.

    Args:
        schemas: OpenAI ``tools`` entries (``{"type": "function", "function": {...}}``).
        tool_choice: ``auto`` (or None) also admits free text; ``required`` admits
            only a call; a tool's name admits only a call of that tool.

    Raises:
        ValueError: No tool is offered, or ``tool_choice`` names a tool not offered.
    """
    functions = [_function(schema) for schema in schemas]
    if tool_choice not in (None, "auto", "required"):
        functions = [function for function in functions if function.get("name") == tool_choice]
        if not functions:
            raise ValueError(f"tool_choice names a tool that is not offered: {tool_choice}")
    if not functions:
        raise ValueError("a tool-call grammar needs at least one tool")
    grammar = _Grammar()
    calls = []
    for index, function in enumerate(functions):
        name = str(function.get("name", ""))
        arguments = grammar.schema(function.get("parameters") or {"type": "object"}, f"t{index}-args")
        calls.append(
            grammar.add(
                f"t{index}-call",
                f'"{{" ws "\\"name\\"" ws ":" ws {literal(json.dumps(name))} ws "," ws '
                f'("\\"arguments\\"" | "\\"parameters\\"") ws ":" ws {arguments} ws "}}"',
            )
        )
    grammar.rules["call"] = " | ".join(calls)
    grammar.rules["tagged"] = f"{literal(OPEN_TAG)} ws call ws {literal(CLOSE_TAG)}"
    if tool_choice in (None, "auto"):
        grammar.rules["text"] = _TEXT_RULE
        root = "ws ( tagged | call | text )"
    else:
        root = "ws ( tagged | call )"
    return f"root ::= {root}\n{grammar.text()}"
