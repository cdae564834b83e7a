"""Wire shapes of shields, the Safety API and OpenAI's moderations."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from .agents import SafetyViolation
from .content import Message
from .limits import MAX_MESSAGES, AtMost, Id, MessageText, RequiredId


class ShieldResource(BaseModel):
    """A registered shield: which provider runs it, on what (``provider_resource_id``), with which params."""

    identifier: str
    provider_id: str
    provider_resource_id: str | None = None
    type: Literal["shield"] = "shield"
    params: dict[str, Any] | None = None


class RegisterShieldRequest(BaseModel):
    """Body of ``POST /v1/shields``."""

    shield_id: RequiredId
    provider_id: Id | None = None
    provider_shield_id: Id | None = None
    params: dict[str, Any] | None = None


class ListShieldsResponse(BaseModel):
    """Body of ``GET /v1/shields``."""

    data: list[ShieldResource]


class RunShieldRequest(BaseModel):
    """Body of ``POST /v1/safety/run-shield``."""

    shield_id: RequiredId
    messages: Annotated[list[Message], AtMost(MAX_MESSAGES)]
    params: dict[str, Any] = Field(default_factory=dict)


class RunShieldResponse(BaseModel):
    """What ``POST /v1/safety/run-shield`` found: a violation, or null."""

    violation: SafetyViolation | None = None
    redacted_messages: list[Message] | None = None
    """Ferryman's addition: the messages with matches replaced, from a redacting shield (else null)."""


class ModerationRequest(BaseModel):
    """Body of ``POST /v1/moderations`` (OpenAI's shape); a list holds at most 64 inputs (each is one shield run)."""

    input: MessageText | Annotated[list[MessageText], Field(min_length=1, max_length=64)]
    model: Id | None = None


class ModerationResult(BaseModel):
    """OpenAI's verdict on one input."""

    flagged: bool
    categories: dict[str, bool]
    category_scores: dict[str, float]
    category_applied_input_types: dict[str, list[Literal["text"]]] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Ferryman's addition: the provider's own codes (Llama Guard's S1–S14), the violation's message."""


class ModerationResponse(BaseModel):
    """OpenAI's ``ModerationCreateResponse``."""

    id: str
    model: str
    results: list[ModerationResult]
