"""The ``webhooks:`` section of the settings: the signing secret, and what one delivery may cost."""

from __future__ import annotations

import random

from pydantic import BaseModel, Field, SecretStr, field_serializer


class WebhookSettings(BaseModel):
    """How run events are posted to the webhooks requests name.

    Attributes:
        secret: The signing secret (``whsec_`` and base64, per Standard Webhooks); unset: one generated once into
            the store, shared by the replicas of that store (shown by ``ferryman webhooks secret``).
        max_attempts: The most attempts one delivery makes before it is given up (``failed``).
        timeout_seconds: The time one attempt may take, address check, connection and answer together.
        backoff_seconds: The wait after the first failed attempt; each later one waits twice the one before.
            Each wait is then shortened by up to half, at random, so that the deliveries an outage failed
            together are not all retried at once.
        max_backoff_seconds: The longest wait between two attempts (before that random shortening).
        max_payload_bytes: The largest event body; a larger event is sent without the run (``data`` holds only
            its ``id`` and ``status``, and ``data_omitted: true``).
        poll_seconds: How often each replica looks for deliveries due (its own runs' are posted at once).
        concurrency: The most deliveries one replica posts at a time.
        retention_days: How many days a delivery is kept (its attempts; its event and URL only until it is
            settled); older ones are deleted by a sweep each replica makes hourly.
        recheck_seconds: How long after a run starts, then how often while it runs, a replica checks that
            its end was queued (a process that died after storing a run's outcome delays its event this long).
    """

    secret: SecretStr | None = None
    max_attempts: int = Field(default=8, ge=1, le=100)
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    backoff_seconds: float = Field(default=5.0, gt=0, le=86_400)
    max_backoff_seconds: float = Field(default=3600.0, gt=0, le=7 * 86_400)
    max_payload_bytes: int = Field(default=1_000_000, ge=1024, le=100_000_000)
    poll_seconds: float = Field(default=5.0, gt=0, le=3600)
    concurrency: int = Field(default=8, ge=1, le=256)
    retention_days: int = Field(default=30, ge=1, le=36_500)
    recheck_seconds: float = Field(default=60.0, gt=0, le=86_400)

    @field_serializer("secret", when_used="json")
    def _reveal(self, secret: SecretStr | None) -> str | None:
        # The JSON dump carries the settings to ``--workers`` processes; repr and str stay masked.
        return secret.get_secret_value() if secret is not None else None

    def backoff(self, failures: int) -> float:
        """The wait after ``failures`` failed attempts (1: ``backoff_seconds``), doubled each time, capped, then
        jittered: between half of that and all of it."""
        capped = float(min(self.backoff_seconds * 2 ** min(failures - 1, 60), self.max_backoff_seconds))
        return capped * random.uniform(0.5, 1.0)  # noqa: S311 (spreads retries; no secret)
