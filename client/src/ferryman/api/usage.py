"""What ``GET /v1/usage`` answers: the tokens and turns of a time range, summed per agent, principal or model."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

UsageGroup = Literal["agent", "principal", "model"]
"""What the usage is summed by: the agent a turn ran (none for a response), the caller, or the model."""


class UsageRow(BaseModel):
    """The usage of one agent, principal or model over the range.

    Attributes:
        key: The agent's id, the principal (``api_key:<name>`` or ``subject:<id>``) or the model; null for
            responses (which run no agent) or, by principal, for what ran with authentication off.
        input_tokens: Prompt tokens the model calls read.
        output_tokens: Tokens the model calls wrote.
        total_tokens: Both together.
        turns: Agents API turns and Responses API responses that started in the range (a resumed turn counts
            once, its tokens each time it runs).
    """

    key: str | None
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    total_tokens: int = Field(ge=0)
    turns: int = Field(ge=0)


class UsageSummary(BaseModel):
    """The usage of a time range, one row per key, the largest total first.

    Attributes:
        group_by: What the rows are keyed by.
        since: The range's start (included).
        until: The range's end (excluded).
        data: The rows.
    """

    object: Literal["usage"] = "usage"
    group_by: UsageGroup
    since: datetime
    until: datetime
    data: list[UsageRow]
