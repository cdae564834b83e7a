"""How the embedded provider offers tools to a local model and shows it their results.

Two ways, chosen by the model's own chat template (``tokenizer.chat_template`` in the GGUF):

* **Native.** A template that mentions ``tools`` (Qwen2.5, Llama 3.x, Hermes, ...) renders the
  tool schemas, the assistant's ``tool_calls`` and ``tool`` messages itself:
  :func:`render_history` with ``native=True`` keeps those roles, arguments as JSON objects.
* **Prompted.** Templates that know no tools (SmolLM2's among them) get
  :func:`tool_system_prompt`: each tool's OpenAI-style JSON schema (one per line) and the
  request to answer, when a tool is wanted, with one tag per call::

      <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>

  The text is appended to the first system message, or becomes one. In the history an
  assistant turn with calls becomes its text followed by those tags, and a tool result
  becomes a user message that asks for the answer and repeats the question --
  ``The answer from get_weather is: Sunny`` / ``Reply to my question "…" in one sentence,
  using this answer.`` -- with no call id, which small models would otherwise copy.

Either way the answer is read back by :class:`~ferryman.inference.tool_parsing.ToolCallParser`,
and generation is constrained by :mod:`ferryman.inference.tool_grammar`. Image parts are
dropped: the model reads text only.
"""

from __future__ import annotations

import json
from typing import Any

from ferryman.api.content import Message
from ferryman.inference.openai_wire import message_param, parse_arguments
from ferryman.inference.tool_parsing import CLOSE_TAG, OPEN_TAG

_INSTRUCTIONS = """\
You can call tools. Each tool is described by a JSON schema:
{schemas}

To call a tool, reply with exactly
<tool_call>{{"name": "<tool name>", "arguments": {{<arguments as a JSON object>}}}}</tool_call>
Write one <tool_call> block per call and nothing inside it but that JSON. \
{choice}"""
# Worded so a small model answers with the value instead of copying the sentence (measured
# with bench/tool_use.py: "The X tool returned: ..." came back verbatim from SmolLM2).
RESULT_TEXT = (
    'The answer from {name} is: {value}\nReply to my question "{question}" in one sentence, using this answer.'
)
RESULT_TEXT_NO_QUESTION = "The answer from {name} is: {value}\nAnswer my question using it."


def template_has_tools(template: str | None) -> bool:
    """Tell whether a Jinja chat template renders tools itself."""
    return template is not None and "tools" in template


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
    return _INSTRUCTIONS.format(schemas=lines, choice=choice)


def add_system_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """Append ``text`` to the first system message, or put a new one first."""
    if messages and messages[0]["role"] == "system":
        first = {**messages[0], "content": f"{messages[0]['content']}\n\n{text}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def render_history(messages: list[Message], native: bool = False) -> list[dict[str, Any]]:
    """Return our messages as chat-template messages.

    Args:
        messages: The conversation so far.
        native: The template renders tools itself: keep ``tool_calls`` and the
            ``tool`` role; otherwise use only roles a plain ChatML template knows.
    """
    params = [message_param(message) for message in messages]
    if native:
        return [_render_native(param) for param in params]
    names = {call["id"]: call["function"]["name"] for param in params for call in param.get("tool_calls") or []}
    rendered: list[dict[str, Any]] = []
    question = ""
    for param in params:
        if param["role"] == "user":
            question = _text_of(param.get("content"))
        rendered.append(_render_prompted(param, names, question))
    return rendered


def tool_call_text(name: str, arguments_json: str) -> str:
    """Return the ``<tool_call>`` tag that stands for one call."""
    body = {"name": name, "arguments": parse_arguments(arguments_json)}
    return f"{OPEN_TAG}{json.dumps(body)}{CLOSE_TAG}"


def _render_native(param: dict[str, Any]) -> dict[str, Any]:
    rendered = {**param, "content": _text_of(param.get("content"))}
    if param.get("tool_calls"):
        # Templates print arguments with ``tojson``: they expect the object, not its JSON text.
        rendered["tool_calls"] = [
            {**call, "function": {**call["function"], "arguments": parse_arguments(call["function"]["arguments"])}}
            for call in param["tool_calls"]
        ]
    return rendered


def _render_prompted(param: dict[str, Any], names: dict[str, str], question: str) -> dict[str, Any]:
    content = _text_of(param.get("content"))
    if param["role"] == "tool":
        name = names.get(param["tool_call_id"], "the tool")
        text = RESULT_TEXT if question else RESULT_TEXT_NO_QUESTION
        return {"role": "user", "content": text.format(name=name, value=content, question=question.strip())}
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
