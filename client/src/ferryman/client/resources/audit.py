"""The audit API: the creates, deletes and denials the server recorded (``client.audit``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import httpx

from ferryman.api.audit import AuditRecord, AuditRecordList

from .._pagination import AsyncPage, PageContent, SyncPage
from .._transport import RequestPlan
from ._base import AsyncResource, SyncResource

Since = float | str | datetime
"""An instant: seconds since the epoch, ISO 8601 text (UTC unless it says otherwise), or a datetime."""


def _list(
    principal: str | None, action: str | None, resource: str | None, outcome: str | None, since: Since | None,
    limit: int | None, after: str | None,
) -> RequestPlan:  # fmt: skip
    shown = since.isoformat() if isinstance(since, datetime) else since
    params = {"principal": principal, "action": action, "resource": resource, "outcome": outcome, "since": shown}
    return RequestPlan("GET", "/v1/audit", params={**params, "limit": limit, "after": after})


def _read(plan: RequestPlan, response: httpx.Response) -> PageContent[AuditRecord]:
    """A page, and the next one's request: ``after`` its ``last_id`` while ``has_more``, even past an empty page
    (a filtered page may stop at the server's scan bound having found nothing)."""
    page = AuditRecordList.model_validate_json(response.content)
    if not (page.has_more and page.last_id):
        return PageContent(list(page.data), None)
    return PageContent(list(page.data), replace(plan, params={**(plan.params or {}), "after": page.last_id}))


class Audit(SyncResource):
    """``client.audit``."""

    def list(self, *, principal: str | None = None, action: str | None = None, resource: str | None = None,
             outcome: str | None = None, since: Since | None = None, limit: int | None = None,
             after: str | None = None) -> SyncPage[AuditRecord]:  # fmt: skip
        """The audit records the caller may read, newest first, a page at a time (iterate for all of them).

        Args:
            principal: Only this principal's (``key:NAME`` or ``sub:ID``).
            action: Only this action's (``create``, ``read``, ``update``, ``delete``).
            resource: Only this resource's (``type::id``).
            outcome: Only ``allowed`` or only ``denied`` records.
            since: Only records from this instant on.
            limit: The most records per page (at most 100).
            after: Start after this record (a page's ``last_id``).
        """
        plan = _list(principal, action, resource, outcome, since, limit, after)
        return SyncPage.fetch(self._transport, plan, _read)


class AsyncAudit(AsyncResource):
    """``client.audit`` of an ``AsyncClient``."""

    async def list(self, *, principal: str | None = None, action: str | None = None, resource: str | None = None,
                   outcome: str | None = None, since: Since | None = None, limit: int | None = None,
                   after: str | None = None) -> AsyncPage[AuditRecord]:  # fmt: skip
        """The audit records the caller may read, newest first (``async for`` over the page for all of them).

        Args: as :meth:`Audit.list`.
        """
        plan = _list(principal, action, resource, outcome, since, limit, after)
        return await AsyncPage.fetch(self._transport, plan, _read)
