"""The ``audit:`` section of the settings: how audit records are written, kept and listed."""

from __future__ import annotations

from pydantic import BaseModel, Field


class AuditSettings(BaseModel):
    """Audit records as data (``GET /v1/audit``), beside their lines on the ``ferryman.audit`` logger.

    Attributes:
        retention_days: How many days a record is kept; older ones are deleted by a periodic sweep.
        queue_size: How many records wait, at most, to be written; past it a record is dropped (counted,
            and a warning logged), so a slow database never slows requests down.
        flush_interval_seconds: How often the records waiting are written (one storage write per batch).
        batch_size: The most records one storage write holds (a full batch is written at once).
        sweep_interval_seconds: How often records older than ``retention_days`` are looked for.
        sweep_batch_size: The most records one write of the sweep deletes.
        max_scan: The most records one filtered page of ``GET /v1/audit`` examines, for the filters no
            index answers (``action``, and all but one of ``resource``, ``principal`` and ``outcome``).
    """

    retention_days: int = Field(default=90, ge=1, le=36_500)
    queue_size: int = Field(default=10_000, ge=1, le=1_000_000)
    flush_interval_seconds: float = Field(default=1.0, gt=0, le=3600)
    batch_size: int = Field(default=500, ge=1, le=10_000)
    sweep_interval_seconds: float = Field(default=3600.0, gt=0)
    sweep_batch_size: int = Field(default=1000, ge=1, le=10_000)
    max_scan: int = Field(default=1000, ge=1, le=100_000)
