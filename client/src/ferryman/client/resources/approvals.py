"""The approval inbox (``client.approvals``): server tool calls waiting for a person, and their decisions."""

from __future__ import annotations

from typing import Literal

from ferryman.api.approvals import Approval, ApprovalList

from .._pagination import AsyncPage, SyncPage, by_cursor
from .._transport import Call, RequestPlan
from ._base import AsyncResource, SyncResource, route_call

Source = Literal["turn", "response"]


def _list(agent_id: str | None, source: Source | None, limit: int | None, order: str | None,
          after: str | None) -> RequestPlan:  # fmt: skip
    params = {"agent_id": agent_id, "source": source, "limit": limit, "order": order, "after": after}
    return RequestPlan("GET", "/v1/approvals", params=params)


def _decide(approval_id: str, verdict: str, reason: str | None) -> Call[Approval]:
    body = {"reason": reason} if reason is not None else {}
    return route_call("POST", "/v1/approvals/{}/" + verdict, Approval, approval_id, json=body)


class Approvals(SyncResource):
    """``client.approvals``."""

    def list(self, *, agent_id: str | None = None, source: Source | None = None, limit: int | None = None,
             order: str | None = None, after: str | None = None) -> SyncPage[Approval]:  # fmt: skip
        """The calls waiting for approval that the caller may read, newest first (iterate for all of them).

        Args:
            agent_id: Only this agent's turns' calls.
            source: Only turns' (``turn``) or only responses' (``response``) calls.
            limit: The most approvals per page (at most 100).
            order: ``desc`` (newest first, the default) or ``asc``.
            after: Start after this approval (a page's ``last_id``).
        """
        return SyncPage.fetch(self._transport, _list(agent_id, source, limit, order, after), by_cursor(ApprovalList))

    def approve(self, approval_id: str, *, reason: str | None = None) -> Approval:
        """Approve a waiting call; the server continues its turn or response (``next_response_id``)."""
        return self._transport.call(_decide(approval_id, "approve", reason))

    def deny(self, approval_id: str, *, reason: str | None = None) -> Approval:
        """Deny a waiting call (the model is told, with ``reason``); the server continues its turn or response."""
        return self._transport.call(_decide(approval_id, "deny", reason))


class AsyncApprovals(AsyncResource):
    """``client.approvals`` of an ``AsyncClient``."""

    async def list(self, *, agent_id: str | None = None, source: Source | None = None, limit: int | None = None,
                   order: str | None = None, after: str | None = None) -> AsyncPage[Approval]:  # fmt: skip
        """The calls waiting for approval that the caller may read (``async for`` over the page for all).

        Args: as :meth:`Approvals.list`.
        """
        plan = _list(agent_id, source, limit, order, after)
        return await AsyncPage.fetch(self._transport, plan, by_cursor(ApprovalList))

    async def approve(self, approval_id: str, *, reason: str | None = None) -> Approval:
        """Approve a waiting call; the server continues its turn or response."""
        return await self._transport.call(_decide(approval_id, "approve", reason))

    async def deny(self, approval_id: str, *, reason: str | None = None) -> Approval:
        """Deny a waiting call; the server continues its turn or response."""
        return await self._transport.call(_decide(approval_id, "deny", reason))
