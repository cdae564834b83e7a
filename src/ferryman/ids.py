"""Identifiers and timestamps."""

from __future__ import annotations

import os
from datetime import UTC, datetime


def new_hex() -> str:
    """A fresh version 4 UUID's 32 hex digits (``uuid.uuid4().hex``: 122 random bits), written from random bytes.

    Written directly: ``uuid.uuid4()`` builds a ``UUID`` and an int on the way, three times the cost, and a
    turn makes about a dozen ids.
    """
    random = bytearray(os.urandom(16))
    random[6] = (random[6] & 0x0F) | 0x40  # version 4
    random[8] = (random[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return random.hex()


def new_id(prefix: str | None = None) -> str:
    """A fresh random id: a version 4 UUID in its usual text, or its hex digits after ``<prefix>_`` (``call_…``)."""
    digits = new_hex()
    if prefix:
        return f"{prefix}_{digits}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)
