"""Identifiers and timestamps."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime


def new_id(prefix: str | None = None) -> str:
    """A fresh random id, optionally prefixed (``call_…``)."""
    value = str(uuid.uuid4())
    return f"{prefix}_{value.replace('-', '')}" if prefix else value


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)
