"""The tool-use evaluation: does a GGUF model call the right tool, and only when it should?

``python -m bench --tool-use [--model PATH.gguf]`` runs the cases of
``bench/data/tool_use_cases.json`` through :class:`~ferryman.inference.embedded.EmbeddedProvider`
(greedy decoding, ``tool_choice=auto``, every case offered the same four tools) and scores three things:

* **call** -- the prompt needs one tool: exactly one call, of that tool, with the expected arguments
  (strings compared without case or spaces, ``*x*`` meaning "contains x"; numbers by value).
* **none** -- the prompt needs no tool: no call, and some text.
* **followup** -- the history already holds the call and its result: no new call, an answer that
  contains the result's value, and none of our own framing echoed back (call ids, tags, instructions).
* **forced** -- the **call** cases again with ``tool_choice=required``: when a call is certain,
  does the model pick the right tool and arguments? Reported apart from ``all``, which covers
  the three ``auto`` kinds.

Nothing here times anything; the score is the share of cases passed, per kind and overall.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ferryman.api.content import CompletionMessage, Message, ToolCall, ToolDef, ToolResponseMessage, UserMessage
from ferryman.inference.base import ChatRequest, Sampling, TextChunk, ToolCallChunk
from ferryman.inference.embedded import EmbeddedProvider

CASES_FILE = Path(__file__).resolve().parent / "data" / "tool_use_cases.json"
KINDS = ("call", "none", "followup", "forced")
AUTO_KINDS = ("call", "none", "followup")
FOLLOWUP_CALL_ID = "call_5e1f0a2b9c3d4e6f"
# Our own wording that must never reach the user's answer.
FRAMING = (
    "tool result for call",
    "call_",
    "<tool_call>",
    "</tool_call>",
    "tool returned",
    "answer the user's question",
)
MAX_TOKENS = 96


@dataclass
class CaseResult:
    """The outcome of one case."""

    kind: str
    prompt: str
    passed: bool
    reason: str
    text: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Report:
    """All cases of one model, with the share passed per kind."""

    model: str
    results: list[CaseResult]

    def scores(self) -> dict[str, tuple[int, int]]:
        """Return ``{kind: (passed, total)}`` for each kind and for ``all``."""
        table = {
            kind: (sum(r.passed for r in self.results if r.kind == kind), sum(r.kind == kind for r in self.results))
            for kind in KINDS
        }
        auto = [r for r in self.results if r.kind in AUTO_KINDS]
        table["all"] = (sum(r.passed for r in auto), len(auto))
        return table

    def as_json(self) -> dict[str, Any]:
        """Return the report as plain JSON data."""
        scores = {kind: {"passed": p, "total": t} for kind, (p, t) in self.scores().items()}
        return {"model": self.model, "scores": scores, "cases": [asdict(r) for r in self.results]}

    def table(self) -> str:
        """Return the scores as a short text table."""
        lines = [f"tool-use evaluation of {self.model}"]
        lines += [f"  {kind:<9} {p:>3}/{t:<3}" for kind, (p, t) in self.scores().items()]
        lines += [f"  FAIL [{r.kind}] {r.prompt!r}: {r.reason}" for r in self.results if not r.passed]
        return "\n".join(lines)


def load_cases(path: Path = CASES_FILE) -> dict[str, Any]:
    """Read the evaluation's tools and cases."""
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def tool_defs(data: dict[str, Any]) -> list[ToolDef]:
    """Return the offered tools as our tool definitions."""
    return [
        ToolDef(name=tool["name"], description=tool["description"], input_schema=tool["parameters"])
        for tool in data["tools"]
    ]


def _normal(value: object) -> str:
    return "".join(str(value).lower().split())


def argument_matches(actual: object, accepted: Sequence[object]) -> bool:
    """Tell whether one argument value is one of the accepted ones.

    Numbers compare by value (``"10"`` matches ``10``); strings without case or
    spaces; an accepted string ``*x*`` matches any value containing ``x``.
    """
    for wanted in accepted:
        if isinstance(wanted, int | float) and not isinstance(wanted, bool):
            try:
                if float(str(actual)) == float(wanted):
                    return True
            except ValueError:
                continue
        elif isinstance(wanted, str) and wanted.startswith("*") and wanted.endswith("*"):
            if _normal(wanted.strip("*")) in _normal(actual):
                return True
        elif _normal(actual) == _normal(wanted):
            return True
    return False


def _arguments(call: dict[str, Any]) -> dict[str, Any] | None:
    try:
        value = json.loads(call["arguments"] or "{}")
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def judge_call(case: dict[str, Any], text: str, calls: list[dict[str, Any]]) -> tuple[bool, str]:
    """Score a case that needs one tool."""
    if not calls:
        return False, "no tool call"
    if len(calls) > 1:
        return False, f"{len(calls)} calls"
    call = calls[0]
    if call["name"] != case["tool"]:
        return False, f"called {call['name']}, wanted {case['tool']}"
    arguments = _arguments(call)
    if arguments is None:
        return False, f"arguments are not a JSON object: {call['arguments']!r}"
    for name, accepted in case["arguments"].items():
        if name not in arguments or not argument_matches(arguments[name], accepted):
            return False, f"argument {name}={arguments.get(name)!r}, wanted one of {accepted}"
    return True, "ok"


def judge_none(text: str, calls: list[dict[str, Any]]) -> tuple[bool, str]:
    """Score a case that needs no tool."""
    if calls:
        return False, f"called {calls[0]['name']}"
    return (True, "ok") if text.strip() else (False, "empty answer")


def judge_followup(case: dict[str, Any], text: str, calls: list[dict[str, Any]]) -> tuple[bool, str]:
    """Score the answer after a tool result."""
    if calls:
        return False, f"called {calls[0]['name']} again"
    lowered = text.lower()
    echoed = [phrase for phrase in FRAMING if phrase in lowered]
    if echoed:
        return False, f"echoed our framing {echoed[0]!r}"
    if not any(value.lower() in lowered for value in case["expect"]):
        return False, f"answer lacks {case['expect'][0]!r}"
    return True, "ok"


def followup_history(case: dict[str, Any]) -> list[Message]:
    """The question, the model's call and the tool's result, ready for the answer."""
    call = ToolCall(call_id=FOLLOWUP_CALL_ID, tool_name=case["tool"], arguments=case["arguments"])
    return [
        UserMessage(content=case["prompt"]),
        CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]),
        ToolResponseMessage(call_id=FOLLOWUP_CALL_ID, content=case["result"]),
    ]


async def _ask(
    provider: EmbeddedProvider, messages: list[Message], tools: list[ToolDef], choice: str
) -> tuple[str, list[Any]]:
    request = ChatRequest(
        model=provider.model_id,
        messages=messages,
        tools=tools,
        tool_choice=choice,
        sampling=Sampling(temperature=0.0, max_tokens=MAX_TOKENS),
    )
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    async for chunk in provider.stream_chat(request):
        if isinstance(chunk, TextChunk):
            text.append(chunk.text)
        elif isinstance(chunk, ToolCallChunk):
            calls.append({"name": chunk.name, "arguments": chunk.arguments})
    return "".join(text), calls


async def evaluate(provider: EmbeddedProvider, data: dict[str, Any], limit: int | None = None) -> Report:
    """Run every case (or the first ``limit`` of each kind) against one provider."""
    tools = tool_defs(data)
    results: list[CaseResult] = []
    for kind in KINDS:
        for case in data["call" if kind == "forced" else kind][:limit]:
            began = time.monotonic()
            messages: list[Message] = (
                followup_history(case) if kind == "followup" else [UserMessage(content=case["prompt"])]
            )
            text, calls = await _ask(provider, messages, tools, "required" if kind == "forced" else "auto")
            if kind in ("call", "forced"):
                passed, reason = judge_call(case, text, calls)
            elif kind == "none":
                passed, reason = judge_none(text, calls)
            else:
                passed, reason = judge_followup(case, text, calls)
            seconds = round(time.monotonic() - began, 2)
            results.append(CaseResult(kind, case["prompt"], passed, reason, text, calls, seconds))
    return Report(provider.model_id, results)


async def run_tool_use(model_path: str | None, limit: int | None = None) -> Report:
    """Evaluate the GGUF at ``model_path`` (the default SmolLM2 when None) on the shipped cases."""
    provider = EmbeddedProvider(model_path=model_path)
    try:
        return await evaluate(provider, load_cases(), limit)
    finally:
        await provider.aclose()
