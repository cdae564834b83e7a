"""The ``schedules:`` section of the settings: how often due schedules are looked for, and their bounds."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ScheduleSettings(BaseModel):
    """Cron schedules (``/v1/schedules``) and the loop that fires them.

    Attributes:
        fire: Whether this replica fires due schedules (off: it only serves the API; another replica fires).
        poll_interval_seconds: How often a replica looks for due schedules: a run starts at most this long
            after its tick.
        claim_seconds: How long a replica holds a due schedule it took while it starts the run; one that
            stopped meanwhile leaves it to another replica after this long.
        claim_batch_size: The most due schedules one look takes at once (it looks again while it gets as many).
        max_per_principal: The most schedules one principal (with authentication off: the server) may hold.
        min_interval_seconds: The shortest time a schedule's expression may leave between two ticks.
        subject_lifetime_seconds: How long a schedule made by a signed-in subject (JWT, OIDC) acts as that
            subject, with the attributes it had then, before it stops until the subject resumes it; and how long
            after a subject's session or response was made another caller's approval continues its run as it.
        max_message_chars: The longest message a schedule sends.
        runs_kept: How many runs of each schedule are kept (the oldest are deleted as new ones are made).
    """

    fire: bool = True
    poll_interval_seconds: float = Field(default=5.0, gt=0, le=3600)
    claim_seconds: float = Field(default=60.0, gt=0, le=86_400)
    claim_batch_size: int = Field(default=50, ge=1, le=1000)
    max_per_principal: int = Field(default=100, ge=1, le=100_000)
    min_interval_seconds: int = Field(default=60, ge=60, le=86_400)
    subject_lifetime_seconds: int = Field(default=30 * 86_400, ge=60, le=366 * 86_400)
    max_message_chars: int = Field(default=32_768, ge=1, le=1024 * 1024)
    runs_kept: int = Field(default=100, ge=1, le=10_000)
