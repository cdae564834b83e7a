"""Shield verdicts in OpenAI's moderation shape: Llama Guard's codes mapped to OpenAI's category names."""

from __future__ import annotations

from typing import Any

from ferryman.api.safety import ModerationResult

from .base import ShieldVerdict

OPENAI_CATEGORIES = (
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/intent",
    "self-harm/instructions",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
)
"""Every category an OpenAI moderation result carries."""

LLAMA_GUARD_TO_OPENAI: dict[str, tuple[str, ...]] = {
    "S1": ("violence",),
    "S2": ("illicit",),
    "S3": ("sexual",),
    "S4": ("sexual/minors",),
    "S9": ("illicit/violent",),
    "S10": ("hate",),
    "S11": ("self-harm",),
    "S12": ("sexual",),
}
"""Llama Guard 3 codes with an OpenAI counterpart; the others (defamation, specialized advice, privacy,
intellectual property, elections, code interpreter abuse) flag the input and are named in its metadata only."""


def codes_of(metadata: dict[str, Any]) -> list[str]:
    """The Llama Guard codes a violation's metadata names (``violation_type``: ``"S1,S10"``)."""
    value = metadata.get("violation_type")
    if not isinstance(value, str):
        return []
    return [code.strip() for code in value.split(",") if code.strip()]


def moderation_result(verdict: ShieldVerdict) -> ModerationResult:
    """One input's result: flagged when the shield found anything, mapped categories set and scored 1."""
    violation = verdict.violation
    hits: set[str] = set()
    metadata: dict[str, Any] = {}
    if violation is not None:
        codes = codes_of(violation.metadata)
        hits = {category for code in codes for category in LLAMA_GUARD_TO_OPENAI.get(code, ())}
        named = violation.metadata.get("openai_categories")  # a remote moderation service's own
        if isinstance(named, list):
            hits |= {category for category in named if category in OPENAI_CATEGORIES}
        metadata = {"violation_level": violation.violation_level, **violation.metadata}
        if violation.user_message:
            metadata["user_message"] = violation.user_message
    return ModerationResult(
        flagged=violation is not None,
        categories={category: category in hits for category in OPENAI_CATEGORIES},
        category_scores={category: 1.0 if category in hits else 0.0 for category in OPENAI_CATEGORIES},
        category_applied_input_types={category: ["text"] for category in OPENAI_CATEGORIES},
        metadata=metadata,
    )
