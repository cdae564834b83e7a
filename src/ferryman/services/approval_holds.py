"""What the Agents and Responses APIs tell the approval inbox: calls held, calls answered, scopes deleted.

A run that holds calls for approval writes them here before its pause reaches
any client (a turn: before its ``turn_awaiting_input`` event; a response:
before it is stored as done), owned by whoever owns the session or response
that holds them, so that the inbox shows them to exactly the callers who may
read the turn's session or the response (``approval_view.py``). A caller answering a run itself (a resume with
``approvals``, a response with ``mcp_approval_response`` items) takes its calls
out of the inbox.
"""

from __future__ import annotations

from collections.abc import Sequence

from ferryman.api.agents import Turn
from ferryman.api.approvals import ApprovalDecision
from ferryman.api.responses import McpApprovalRequestItem, McpTool, Response
from ferryman.engine.approvals import approval_digest
from ferryman.inference.openai_wire import parse_arguments
from ferryman.storage.base import Store
from ferryman.storage.domain.approvals import HeldCall, HeldCalls, turn_approval_id
from ferryman.storage.kernel.model import Owner

from .record_guard import owners_of


class ApprovalHolds:
    """Writes the calls runs hold for approval, and takes out those answered elsewhere.

    Args:
        store: Where the sessions' and responses' owners are read.
        calls: The held calls.
    """

    def __init__(self, store: Store, calls: HeldCalls) -> None:
        self._store = store
        self.calls = calls

    async def _owner(self, kind: str, record_id: str) -> Owner | None:
        return (await owners_of(self._store, kind, [record_id])).get(record_id)

    async def hold_turn(self, turn: Turn, agent_id: str | None) -> None:
        """Store the calls a paused turn holds for approval (none: nothing to do)."""
        requests = turn.approval_requests or []
        if not requests:
            return
        ids = [turn_approval_id(turn.turn_id, request.call_id) for request in requests]
        calls = [
            HeldCall(
                id=approval_id,
                source="turn",
                scope=turn.session_id,
                agent_id=agent_id,
                session_id=turn.session_id,
                turn_id=turn.turn_id,
                call_id=request.call_id,
                tool_name=request.tool_name,
                arguments=request.arguments,
                digest=request.digest,
                held_with=ids,
            )
            for approval_id, request in zip(ids, requests, strict=True)
        ]
        await self.calls.hold(calls, await self._owner("session", turn.session_id))

    async def hold_response(self, response: Response, session_id: str) -> None:
        """Store the ``mcp_approval_request`` items a finished response ended with (none: nothing to do).

        ``session_id``: the response's session; in a conversation, deleting it (the conversation) deletes them.
        """
        requests = [item for item in response.output if isinstance(item, McpApprovalRequestItem) and item.id]
        if not requests:
            return
        conversation_id = response.conversation.id if response.conversation else None
        ids = [item.id for item in requests if item.id]
        calls = []
        for item in requests:
            assert item.id is not None
            arguments = parse_arguments(item.arguments)
            digest, label = request_binding(item, response)
            calls.append(
                HeldCall(
                    id=item.id,
                    source="response",
                    scope=session_id if conversation_id else response.id,
                    response_id=response.id,
                    conversation_id=conversation_id,
                    call_id=item.id,
                    tool_name=item.name,
                    arguments=arguments,
                    digest=digest,
                    server_label=label,
                    held_with=ids,
                )
            )
        await self.calls.hold(calls, await self._owner("response", response.id))

    async def decisions(self, turn_id: str, requests: Sequence[str], given: set[str]) -> list[ApprovalDecision]:
        """The inbox's decisions on the calls a turn's pause holds (their call ids: ``requests``), but those named
        in ``given``, bound to their digests."""
        ids = [turn_approval_id(turn_id, call_id) for call_id in requests if call_id not in given]
        return [
            ApprovalDecision(
                call_id=held.call_id, approve=held.decision == "approved", reason=held.reason, digest=held.digest
            )
            for held in await self.calls.decided(ids)
        ]

    async def turn_answered(self, turn_id: str, requests: Sequence[str]) -> None:
        """The turn was resumed (by a client, or for the inbox): the calls its pause held leave the inbox."""
        await self.calls.close([turn_approval_id(turn_id, call_id) for call_id in requests])

    async def requests_answered(self, request_ids: Sequence[str]) -> None:
        """A response answered these ``mcp_approval_request`` items itself: they leave the inbox."""
        await self.calls.close(request_ids)

    async def response_deleted(self, response: Response) -> None:
        """A response was deleted: the calls it held go too."""
        requests = [item.id for item in response.output if isinstance(item, McpApprovalRequestItem) and item.id]
        await self.calls.delete_ids(requests)
        await self.calls.forget(response.id)

    async def forget(self, scope: str) -> None:
        """A session or response was deleted: its held calls go too."""
        await self.calls.forget(scope)


def request_binding(item: McpApprovalRequestItem, response: Response) -> tuple[str, str | None]:
    """What an approval binds of a response's request item: the digest of its call, and the label of the MCP
    server it goes to (None: a hosted tool of ferryman's)."""
    labels = {tool.server_label for tool in response.tools if isinstance(tool, McpTool)}
    label = item.server_label if item.server_label in labels else None
    return approval_digest(item.name, parse_arguments(item.arguments)), label
