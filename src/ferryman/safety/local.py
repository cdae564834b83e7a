"""The model-free local shield (provider ``ferryman-local``): secrets, card numbers, e-mail and phone numbers,
and the registration's own blocked patterns, each blocked, redacted or warned about.

Params of a registration (or of one call, over them):

- ``action``: ``block`` (default: an ``error`` violation), ``redact`` (matches become
  ``[REDACTED:<kind>]`` in the messages given back, and an ``info`` violation records
  the kinds), or ``warn`` (a ``warn`` violation; the messages go on unchanged).
- ``detect``: the kinds to look for (default: every kind but ``phone``).
- ``blocked_patterns``: regular expressions (kind ``pattern``), matched case-insensitively.
- ``user_message``: the message of a blocking violation.

Every user, assistant and tool message given is inspected (system prompts are the
operator's and are left alone); what is inspected is the caller's choice. Matched
text never appears in a verdict, only the kinds and their counts.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from ferryman.api.agents import SafetyViolation
from ferryman.api.content import (
    CompletionMessage,
    ImageContentItem,
    InterleavedContent,
    Message,
    SystemMessage,
    TextContentItem,
    ToolCall,
)
from ferryman.api.safety import ShieldResource
from ferryman.errors import InvalidRequestError
from ferryman.inference.openai_wire import parse_arguments

from .base import ShieldOptions, ShieldVerdict

PROVIDER_ID = "ferryman-local"

Action = Literal["block", "redact", "warn"]

_DETECTORS: dict[str, re.Pattern[str]] = {
    "private_key": re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[\s\S]*\Z)"
    ),
    "aws_access_key": re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"),
    "github_token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    "slack_token": re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    "openai_key": re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    "jwt": re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{8,}"),
    "email": re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
    "card_number": re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"),
    "phone": re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)|\d{2,4})[ .-]?\d{3,4}[ .-]?\d{3,4}(?!\w)"),
}
"""Each kind's pattern, in precedence order (an earlier kind wins an overlapping span)."""

KINDS = (*_DETECTORS, "pattern")
"""Every kind a verdict may name."""
DEFAULT_KINDS = tuple(kind for kind in _DETECTORS if kind != "phone")
"""The kinds detected unless ``params.detect`` says: phone numbers are opt-in (too many false positives)."""
_MAX_PATTERN = 1000


def luhn_valid(digits: str) -> bool:
    """Whether a digit string passes the Luhn checksum (every payment card number does)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


@dataclass(frozen=True)
class _Match:
    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class LocalRules:
    """What one run looks for and does, read from params."""

    action: Action
    kinds: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    user_message: str

    @classmethod
    def of(cls, params: dict[str, Any]) -> LocalRules:
        """Read and check the rules.

        Raises:
            InvalidRequestError: an unknown action or kind, or a pattern that does not compile.
        """
        action = params.get("action", "block")
        if action not in ("block", "redact", "warn"):
            raise InvalidRequestError("params.action must be 'block', 'redact' or 'warn'", "params")
        kinds = params.get("detect", list(DEFAULT_KINDS))
        if not isinstance(kinds, list) or any(kind not in _DETECTORS for kind in kinds):
            raise InvalidRequestError(f"params.detect must list kinds among: {', '.join(_DETECTORS)}", "params")
        message = params.get("user_message", "The message was blocked: it contains {kinds}.")
        if not isinstance(message, str):
            raise InvalidRequestError("params.user_message must be a string", "params")
        return cls(action, tuple(kinds), _compile(params.get("blocked_patterns") or []), message)

    def find(self, text: str) -> list[_Match]:
        """The non-overlapping matches in ``text``, in order."""
        found = [
            _Match(m.start(), m.end(), kind)
            for kind in self.kinds
            for m in _DETECTORS[kind].finditer(text)
            if kind != "card_number" or luhn_valid(re.sub(r"\D", "", m.group()))
        ]
        found += [_Match(m.start(), m.end(), "pattern") for p in self.patterns for m in p.finditer(text) if m.group()]
        precedence = {kind: index for index, kind in enumerate(KINDS)}
        kept: list[_Match] = []
        for match in sorted(found, key=lambda m: (precedence[m.kind], m.start)):
            if all(match.end <= k.start or match.start >= k.end for k in kept):
                kept.append(match)
        return sorted(kept, key=lambda m: m.start)


def _compile(patterns: Any) -> tuple[re.Pattern[str], ...]:
    if not isinstance(patterns, list) or not all(isinstance(p, str) and 0 < len(p) <= _MAX_PATTERN for p in patterns):
        raise InvalidRequestError("params.blocked_patterns must be a list of regular expressions", "params")
    compiled: list[re.Pattern[str]] = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as exc:
            raise InvalidRequestError(
                f"params.blocked_patterns: '{pattern}' does not compile: {exc}", "params"
            ) from exc
    return tuple(compiled)


def _redact(text: str, matches: list[_Match]) -> str:
    parts: list[str] = []
    cursor = 0
    for match in matches:
        parts.append(text[cursor : match.start])
        parts.append(f"[REDACTED:{match.kind}]")
        cursor = match.end
    parts.append(text[cursor:])
    return "".join(parts)


class _Scan:
    """One pass over messages: what was found, and the messages with it redacted."""

    def __init__(self, rules: LocalRules) -> None:
        self.rules = rules
        self.found: Counter[str] = Counter()

    def text(self, text: str) -> str:
        matches = self.rules.find(text)
        self.found.update(match.kind for match in matches)
        return _redact(text, matches) if matches else text

    def content(self, content: InterleavedContent) -> InterleavedContent:
        if isinstance(content, str):
            return self.text(content)
        if isinstance(content, TextContentItem):
            return TextContentItem(text=self.text(content.text))
        if isinstance(content, ImageContentItem):
            return content
        return [TextContentItem(text=self.text(i.text)) if isinstance(i, TextContentItem) else i for i in content]

    def tool_call(self, call: ToolCall) -> ToolCall:
        raw = call.arguments_json or ""
        redacted = self.text(raw)
        if redacted == raw:
            return call
        # The marker holds no quote or backslash, so JSON stays JSON with it in a string.
        arguments = parse_arguments(redacted)
        return ToolCall(call_id=call.call_id, tool_name=call.tool_name, arguments=arguments, arguments_json=redacted)

    def message(self, message: Message) -> Message:
        if isinstance(message, SystemMessage):
            return message
        update: dict[str, Any] = {"content": self.content(message.content)}
        if isinstance(message, CompletionMessage) and message.tool_calls:
            update["tool_calls"] = [self.tool_call(call) for call in message.tool_calls]
        return message.model_copy(update=update)


class LocalShield:
    """A registration of the ``ferryman-local`` provider, runnable.

    Args:
        resource: The registration.
    """

    def __init__(self, resource: ShieldResource) -> None:
        self.shield_id = resource.identifier
        self._params = dict(resource.params or {})
        options = ShieldOptions.of(self._params)
        self.fail_open = options.fail_open
        self.timeout_seconds = options.timeout_seconds
        LocalRules.of(self._params)

    async def run(self, messages: list[Message], params: dict[str, Any]) -> ShieldVerdict:
        """Look for the configured kinds in ``messages`` and block, redact or warn."""
        rules = LocalRules.of({**self._params, **params})
        scan = _Scan(rules)
        redacted = [scan.message(message) for message in messages]
        if not scan.found:
            return ShieldVerdict(None)
        kinds = sorted(scan.found)
        metadata: dict[str, Any] = {"action": rules.action, "kinds": kinds, "counts": dict(scan.found)}
        if rules.action == "redact":
            return ShieldVerdict(SafetyViolation(violation_level="info", metadata=metadata), redacted)
        level: Literal["error", "warn"] = "error" if rules.action == "block" else "warn"
        message = rules.user_message.replace("{kinds}", ", ".join(k.replace("_", " ") for k in kinds))
        return ShieldVerdict(SafetyViolation(violation_level=level, user_message=message, metadata=metadata))


class LocalShieldProvider:
    """Builds ``ferryman-local`` shields (no model, no network)."""

    provider_id = PROVIDER_ID

    def build(self, resource: ShieldResource) -> LocalShield:
        """The shield of a registration (its params checked)."""
        return LocalShield(resource)
