"""Shields for tests of turns: a word shield (block, warn or redact), one that raises, one that hangs.

Each keeps the messages it was asked about, so a test can tell what it saw and when.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from ferryman.api.agents import SafetyViolation
from ferryman.api.content import Message, ToolParameter, content_to_text
from ferryman.api.registry import Tool, ToolInvocationResult
from ferryman.safety.base import ShieldVerdict

Level = Literal["info", "warn", "error"]


def unique(name: str) -> str:
    """A shield id no other test uses (the in-process server's registry is shared)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


@dataclass
class WordShield:
    """Flags messages holding ``word``: at ``level``, or replaces it with ``[REDACTED:word]`` when ``redact``."""

    shield_id: str
    word: str
    level: Level = "error"
    redact: bool = False
    fail_open: bool = False
    timeout_seconds: float = 10.0
    seen: list[list[Message]] = field(default_factory=list)

    async def run(self, messages: list[Message], params: dict[str, Any]) -> ShieldVerdict:
        """Flag or redact the word."""
        self.seen.append(list(messages))
        if not any(self.word in content_to_text(m.content) for m in messages):
            return ShieldVerdict(None)
        metadata = {"shield_id": self.shield_id}
        if self.redact:
            note = SafetyViolation(violation_level="info", user_message=None, metadata=metadata)
            return ShieldVerdict(note, [self._redacted(m) for m in messages])
        message = f"blocked by {self.shield_id}"
        return ShieldVerdict(SafetyViolation(violation_level=self.level, user_message=message, metadata=metadata))

    def _redacted(self, message: Message) -> Message:
        text = content_to_text(message.content).replace(self.word, f"[REDACTED:{self.word}]")
        return message.model_copy(update={"content": text})


@dataclass
class BrokenShield:
    """A shield whose provider fails: it raises with internals that must never reach the caller."""

    shield_id: str
    fail_open: bool = False
    timeout_seconds: float = 10.0

    async def run(self, messages: list[Message], params: dict[str, Any]) -> ShieldVerdict:
        """Fail."""
        raise RuntimeError("provider exploded: secret-internal-detail")


@dataclass
class HangingShield:
    """A shield that never answers (until the test ends): its caller's timeout decides."""

    shield_id: str
    fail_open: bool = False
    timeout_seconds: float = 0.05
    started: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, messages: list[Message], params: dict[str, Any]) -> ShieldVerdict:
        """Wait forever."""
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class EchoTool:
    """A server tool (``echo`` of ``test::echo``) that records its calls and answers with a fixed text."""

    def __init__(self, answer: str = "echoed") -> None:
        self.calls: list[dict[str, Any]] = []
        self.answer = answer

    @property
    def definition(self) -> Tool:
        parameter = ToolParameter(name="text", parameter_type="string", description="text")
        return Tool(identifier="echo", toolgroup_id="test::echo", description="echo", parameters=[parameter])

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        self.calls.append(arguments)
        return ToolInvocationResult(content=self.answer)
