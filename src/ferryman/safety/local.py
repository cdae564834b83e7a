"""The model-free local shield (provider ``ferryman-local``): secrets, card numbers, e-mail and phone numbers,
and the registration's own blocked patterns, each blocked, redacted or warned about.

Secrets are what detect-secrets' plugins find, and the patterns beside them (``secrets.py``),
each under its kind (``aws_access_key``, ``aws_secret_key``, ``private_key``, ``github_token``,
``jwt``, ``secret_keyword``, ``high_entropy_string``…: :data:`~.secret_kinds.SECRET_KINDS`); card
numbers are digit runs that pass the Luhn check.

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

import asyncio
import bisect
import re
import threading
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
from .secret_kinds import SECRET_KINDS

PROVIDER_ID = "ferryman-local"

Action = Literal["block", "redact", "warn"]

_DETECTORS: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
    "card_number": re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"),
    "phone": re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)|\d{2,4})[ .-]?\d{3,4}[ .-]?\d{3,4}(?!\w)"),
}
"""The kinds other than secrets, each with its pattern."""

DETECTABLE = (*SECRET_KINDS, *_DETECTORS)
"""The kinds ``params.detect`` may name."""
KINDS = (*DETECTABLE, "pattern")
"""Every kind a verdict may name, in precedence order (an earlier kind wins an overlapping span)."""
DEFAULT_KINDS = tuple(kind for kind in DETECTABLE if kind != "phone")
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
        if not isinstance(kinds, list) or any(kind not in DETECTABLE for kind in kinds):
            raise InvalidRequestError(f"params.detect must list kinds among: {', '.join(DETECTABLE)}", "params")
        message = params.get("user_message", "The message was blocked: it contains {kinds}.")
        if not isinstance(message, str):
            raise InvalidRequestError("params.user_message must be a string", "params")
        return cls(action, tuple(kinds), _compile(params.get("blocked_patterns") or []), message)

    def find(self, text: str) -> list[_Match]:
        """The non-overlapping matches in ``text``, in order."""
        # detect-secrets loads with the first text inspected, not with the server (see secret_kinds.py).
        from .secrets import bounded_matches, find_secrets

        found = [_Match(f.start, f.end, f.kind) for f in find_secrets(text, frozenset(self.kinds)) if f.end > f.start]
        found += [
            _Match(m.start(), m.end(), kind)
            for kind in self.kinds
            if kind in _DETECTORS
            # In bounded pieces: an e-mail address's pattern reads the rest of a run from each word in it.
            for m in bounded_matches(_DETECTORS[kind], text)
            if kind != "card_number" or luhn_valid(re.sub(r"\D", "", m.group()))
        ]
        found += [_Match(m.start(), m.end(), "pattern") for p in self.patterns for m in p.finditer(text) if m.group()]
        precedence = {kind: index for index, kind in enumerate(KINDS)}
        kept: list[_Match] = []  # in text order, none overlapping: only a new match's neighbours can overlap it
        # Of overlapping findings the earliest kind wins, then the earliest and longest (a whole JWT, not its head).
        for match in sorted(found, key=lambda m: (precedence[m.kind], m.start, m.start - m.end)):
            at = bisect.bisect_right(kept, match.start, key=lambda k: k.start)
            if (at == 0 or kept[at - 1].end <= match.start) and (at == len(kept) or match.end <= kept[at].start):
                kept.insert(at, match)
        return kept


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


def _scan_messages(scan: _Scan, messages: list[Message], stop: threading.Event) -> list[Message]:
    """Each message as ``scan`` leaves it, until ``stop`` is set (its caller gave up: the rest is not read)."""
    redacted: list[Message] = []
    for message in messages:
        if stop.is_set():
            break
        redacted.append(scan.message(message))
    return redacted


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
        # A long message takes a while to scan (seconds a megabyte at worst): off the event loop. A scan whose
        # caller gave up (the shield's timeout) stops at its next message rather than hold a worker thread on.
        stop = threading.Event()
        try:
            redacted = await asyncio.to_thread(_scan_messages, scan, messages, stop)
        finally:
            stop.set()
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
