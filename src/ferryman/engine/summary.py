"""Compaction's summaries: what a run of messages said, written by a model, within that model's context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ferryman.api.content import (
    CompletionMessage,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
    content_to_text,
)
from ferryman.inference.base import ChatRequest, FinishChunk, Sampling, TextChunk, Usage
from ferryman.inference.context import ANSWER_TOKENS

from .inference_step import TurnModel

SUMMARY_TOKENS = 256
"""The longest summary asked for (the model's ``max_tokens``)."""
SUMMARY_SHARE = 8
"""A summary takes at most this part of the model's context: it must fit in the prompt with what it keeps."""
INSTRUCTIONS = (
    "Summarize the conversation below for whoever continues it: the facts, names, numbers, decisions and open "
    "questions it holds, and what the user asked for. Write only the summary, briefly."
)


def transcript(messages: list[Message]) -> str:
    """The messages as plain text, one line per message, each named by who said it."""
    lines = []
    for message in messages:
        text = content_to_text(message.content)
        if isinstance(message, CompletionMessage):
            calls = ", ".join(f"{c.tool_name}({c.arguments_json or ''})" for c in message.tool_calls or [])
            lines.append(f"assistant: {text}" + (f" [called {calls}]" if calls else ""))
        elif isinstance(message, ToolResponseMessage):
            lines.append(f"tool result: {text}")
        elif isinstance(message, UserMessage):
            lines.append(f"user: {text}")
        else:
            lines.append(f"system: {text}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Summary:
    """A summary's text, and the tokens its request used (None: the model said none)."""

    text: str
    usage: Usage | None


async def summarize(
    models: TurnModel,
    model: str,
    messages: list[Message],
    provider_data: dict[str, Any] | None = None,
    max_tokens: int = SUMMARY_TOKENS,
) -> Summary:
    """A summary of ``messages`` by ``model``; of their newest part when all of them do not fit its context.

    The transcript is halved from its oldest end (at a line's start) until the request fits (the model's own
    count, else the estimate): a summary request never goes over the context either. The summary is asked to
    be at most ``max_tokens``, and at most an eighth of the context (:data:`SUMMARY_SHARE`).
    """
    text = transcript(messages)
    window = models.context_window(model)
    if window is not None:
        max_tokens = max(1, min(max_tokens, window.tokens // SUMMARY_SHARE))
    while True:
        request = ChatRequest(
            model=model,
            messages=[SystemMessage(content=INSTRUCTIONS), UserMessage(content=text)],
            sampling=Sampling(temperature=0.0, max_tokens=max_tokens),
            provider_data=provider_data,
        )
        if window is None or len(text) < 2:
            break
        budget = window.tokens - (max_tokens or ANSWER_TOKENS)
        size = await models.prompt_size(request, max(1, budget))
        if size.tokens <= budget and not size.at_least:
            break
        half = len(text) // 2
        line = text.find("\n", half)
        text = text[line + 1 :] if 0 <= line < len(text) - 1 else text[half:]
    parts: list[str] = []
    usage: Usage | None = None
    async for chunk in models.stream_chat(request):
        if isinstance(chunk, TextChunk):
            parts.append(chunk.text)
        elif isinstance(chunk, FinishChunk):
            usage = chunk.usage
    return Summary("".join(parts).strip(), usage)
