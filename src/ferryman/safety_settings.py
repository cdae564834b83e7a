"""Safety settings (``safety:`` in the config file)."""

from __future__ import annotations

from pydantic import BaseModel


class SafetySettings(BaseModel):
    """How the server keeps what its shields blocked.

    Whatever a shield blocks (an input, a tool call's arguments, a tool's result) is never
    stored where a later turn replays it: placeholders stand in for it there. With
    ``keep_blocked_text`` the blocked messages are also kept, raw, in the blocking
    ``shield_call`` step's violation metadata (``blocked_messages``), for an operator's
    review; no history is built from it, so it is never sent to a model or a guard either way.

    Attributes:
        keep_blocked_text: Keep the raw blocked messages for review (off by default).
    """

    keep_blocked_text: bool = False
