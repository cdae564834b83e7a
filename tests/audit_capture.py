"""The audit records a test logged (``ferryman.audit``), as tuples; the unit conftest's ``caught`` captures them."""

from __future__ import annotations

import pytest

Audit = list[tuple[str, str | None, str, str]]
"""Each record's event, principal, action and resource."""


def audit_of(caplog: pytest.LogCaptureFixture) -> Audit:
    """The audit records ``caplog`` holds, oldest first."""
    return [
        (r.event, r.principal, r.action, r.resource)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "ferryman.audit"
    ]
