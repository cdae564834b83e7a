"""The Agents API: agents, their sessions, turns (run, streamed, resumed, replayed) and steps.

Each route is described once, as a :class:`~ferryman.client._transport.Call` or a stream plan;
the sync and async classes below only run them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

from ferryman.api.agents import (
    Agent,
    AgentConfig,
    AgentCreated,
    Document,
    MultitaskStrategy,
    Session,
    SessionCreated,
    Step,
    StepResponse,
    ToolGroupRef,
    Turn,
)
from ferryman.api.approvals import ApprovalDecision
from ferryman.api.content import ToolResponse, TurnInputMessage
from ferryman.api.inference import ToolConfig

from .._pagination import AsyncPage, SyncPage, by_position
from .._parsing import body, model, nothing
from .._streaming import AsyncStream, Stream, TurnData, TurnStreamKind
from .._transport import AsyncTransport, Call, RequestPlan, SyncTransport, path
from ._base import PROVIDER_DATA_HEADER, AsyncResource, SyncResource

Messages = Sequence[TurnInputMessage | Mapping[str, Any]]
Toolgroups = Sequence[ToolGroupRef | Mapping[str, Any]]

_SESSION = "/v1/agents/{}/session/{}"
_TURN = _SESSION + "/turn/{}"


def _page_params(start_index: int, limit: int | None) -> dict[str, Any]:
    return {"start_index": start_index, "limit": limit}


def _create_agent(agent_config: AgentConfig | Mapping[str, Any]) -> Call[AgentCreated]:
    return Call(RequestPlan("POST", "/v1/agents", json=body(agent_config=agent_config), idempotent=True),
                model(AgentCreated))  # fmt: skip


def _list_agents(start_index: int, limit: int | None) -> RequestPlan:
    return RequestPlan("GET", "/v1/agents", params=_page_params(start_index, limit))


def _retrieve_agent(agent_id: str) -> Call[Agent]:
    return Call(RequestPlan("GET", path("/v1/agents/{}", agent_id)), model(Agent))


def _delete_agent(agent_id: str) -> Call[None]:
    return Call(RequestPlan("DELETE", path("/v1/agents/{}", agent_id)), nothing)


def _create_session(agent_id: str, session_name: str) -> Call[SessionCreated]:
    plan = RequestPlan("POST", path("/v1/agents/{}/session", agent_id), json=body(session_name=session_name),
                       idempotent=True)  # fmt: skip
    return Call(plan, model(SessionCreated))


def _list_sessions(agent_id: str, start_index: int, limit: int | None) -> RequestPlan:
    return RequestPlan("GET", path("/v1/agents/{}/sessions", agent_id), params=_page_params(start_index, limit))


def _retrieve_session(agent_id: str, session_id: str, turn_ids: Sequence[str] | None) -> Call[Session]:
    params = {"turn_ids": ",".join(turn_ids) if turn_ids else None}
    return Call(RequestPlan("GET", path(_SESSION, agent_id, session_id), params=params), model(Session))


def _delete_session(agent_id: str, session_id: str) -> Call[None]:
    return Call(RequestPlan("DELETE", path(_SESSION, agent_id, session_id)), nothing)


def _fork_session(agent_id: str, session_id: str, turn_id: str, session_name: str | None) -> Call[SessionCreated]:
    plan = RequestPlan("POST", path(_SESSION + "/fork", agent_id, session_id),
                       json=body(turn_id=turn_id, session_name=session_name), idempotent=True)  # fmt: skip
    return Call(plan, model(SessionCreated))


def _headers(idempotency_key: str | None, provider_data: Mapping[str, Any] | None) -> dict[str, str]:
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    if provider_data is not None:
        headers[PROVIDER_DATA_HEADER] = json.dumps(dict(provider_data))
    return headers


def _run_turn(
    route: str, stream: bool, idempotency_key: str | None, provider_data: Mapping[str, Any] | None, **fields: Any
) -> RequestPlan:
    return RequestPlan("POST", route, json=body(stream=stream, **fields), idempotent=True, stream=stream,
                       headers=_headers(idempotency_key, provider_data))  # fmt: skip


def _create_turn(agent_id: str, session_id: str, stream: bool, idempotency_key: str | None,
                 provider_data: Mapping[str, Any] | None, **fields: Any) -> RequestPlan:  # fmt: skip
    return _run_turn(path(_SESSION + "/turn", agent_id, session_id), stream, idempotency_key, provider_data, **fields)


def _resume_turn(agent_id: str, session_id: str, turn_id: str, stream: bool, idempotency_key: str | None,
                 provider_data: Mapping[str, Any] | None, **fields: Any) -> RequestPlan:  # fmt: skip
    route = path(_TURN + "/resume", agent_id, session_id, turn_id)
    return _run_turn(route, stream, idempotency_key, provider_data, **fields)


def _turn_events(agent_id: str, session_id: str, turn_id: str, after: int | None) -> RequestPlan:
    headers = {} if after is None else {"Last-Event-ID": str(after)}
    return RequestPlan("GET", path(_TURN + "/events", agent_id, session_id, turn_id), headers=headers, stream=True)


def _retrieve_turn(agent_id: str, session_id: str, turn_id: str) -> Call[Turn]:
    return Call(RequestPlan("GET", path(_TURN, agent_id, session_id, turn_id)), model(Turn))


def _retrieve_step(agent_id: str, session_id: str, turn_id: str, step_id: str) -> Call[StepResponse]:
    route = path(_TURN + "/step/{}", agent_id, session_id, turn_id, step_id)
    return Call(RequestPlan("GET", route), model(StepResponse))


class Agents(SyncResource):
    """``client.agents``: agents, with ``sessions``, ``turns`` and ``steps`` beneath."""

    def __init__(self, transport: SyncTransport) -> None:
        super().__init__(transport)
        self.sessions = Sessions(transport)
        self.turns = Turns(transport)
        self.steps = Steps(transport)

    def create(self, agent_config: AgentConfig | Mapping[str, Any]) -> AgentCreated:
        """Create an agent; the answer carries its ``agent_id``."""
        return self._transport.call(_create_agent(agent_config))

    def retrieve(self, agent_id: str) -> Agent:
        """One agent."""
        return self._transport.call(_retrieve_agent(agent_id))

    def list(self, *, start_index: int = 0, limit: int | None = None) -> SyncPage[Agent]:
        """The agents, a page at a time (iterate the page for all of them)."""
        return SyncPage.fetch(self._transport, _list_agents(start_index, limit), by_position(Agent))

    def delete(self, agent_id: str) -> None:
        """Delete an agent with its sessions."""
        self._transport.call(_delete_agent(agent_id))


class Sessions(SyncResource):
    """``client.agents.sessions``."""

    def create(self, agent_id: str, *, session_name: str) -> SessionCreated:
        """Open a session with an agent; the answer carries its ``session_id``."""
        return self._transport.call(_create_session(agent_id, session_name))

    def retrieve(self, agent_id: str, session_id: str, *, turn_ids: Sequence[str] | None = None) -> Session:
        """A session with its turns (only ``turn_ids`` if given)."""
        return self._transport.call(_retrieve_session(agent_id, session_id, turn_ids))

    def list(self, agent_id: str, *, start_index: int = 0, limit: int | None = None) -> SyncPage[Session]:
        """An agent's sessions, a page at a time."""
        return SyncPage.fetch(self._transport, _list_sessions(agent_id, start_index, limit), by_position(Session))

    def delete(self, agent_id: str, session_id: str) -> None:
        """Delete a session."""
        self._transport.call(_delete_session(agent_id, session_id))

    def fork(self, agent_id: str, session_id: str, *, turn_id: str, session_name: str | None = None) -> SessionCreated:
        """A new session whose history is this one's up to and including ``turn_id``; the original is untouched."""
        return self._transport.call(_fork_session(agent_id, session_id, turn_id, session_name))


class Turns(SyncResource):
    """``client.agents.turns``: run a turn, resume it with tool results or approvals, read it, replay its events."""

    @overload
    def create(self, agent_id: str, session_id: str, *, messages: Messages, stream: Literal[False] = False,
               documents: Sequence[Document | Mapping[str, Any]] | None = None, toolgroups: Toolgroups | None = None,
               tool_config: ToolConfig | Mapping[str, Any] | None = None, idempotency_key: str | None = None,
               provider_data: Mapping[str, Any] | None = None,
               multitask_strategy: MultitaskStrategy | None = None,
               webhook: str | None = None) -> Turn: ...  # fmt: skip

    @overload
    def create(self, agent_id: str, session_id: str, *, messages: Messages, stream: Literal[True],
               documents: Sequence[Document | Mapping[str, Any]] | None = None, toolgroups: Toolgroups | None = None,
               tool_config: ToolConfig | Mapping[str, Any] | None = None, idempotency_key: str | None = None,
               provider_data: Mapping[str, Any] | None = None,
               multitask_strategy: MultitaskStrategy | None = None,
               webhook: str | None = None) -> Stream[TurnData]: ...  # fmt: skip

    def create(self, agent_id: str, session_id: str, *, messages: Messages, stream: bool = False,
               documents: Sequence[Document | Mapping[str, Any]] | None = None, toolgroups: Toolgroups | None = None,
               tool_config: ToolConfig | Mapping[str, Any] | None = None, idempotency_key: str | None = None,
               provider_data: Mapping[str, Any] | None = None,
               multitask_strategy: MultitaskStrategy | None = None,
               webhook: str | None = None) -> Turn | Stream[TurnData]:  # fmt: skip
        """Run a turn: the finished ``Turn``, or (``stream=True``) its events as they happen.

        A dropped stream is read on where it stopped; a repeated request (a retry) reuses the call's
        ``Idempotency-Key``, so the turn runs once. ``multitask_strategy`` says what the turn does while
        another runs in the session (``reject``, the server's default; ``enqueue``, ``interrupt``,
        ``rollback``). With ``webhook`` (an ``http(s)`` URL) the server posts a signed ``turn.completed``,
        ``turn.failed`` or ``turn.awaiting_input`` there when this run of the turn ends.
        """
        plan = _create_turn(agent_id, session_id, stream, idempotency_key, provider_data, messages=messages,
                            documents=documents, toolgroups=toolgroups, tool_config=tool_config,
                            multitask_strategy=multitask_strategy, webhook=webhook)  # fmt: skip
        if stream:
            return Stream(self._transport, plan, TurnStreamKind(agent_id, session_id))
        return self._transport.call(Call(plan, model(Turn)))

    @overload
    def resume(self, agent_id: str, session_id: str, turn_id: str, *,
               tool_responses: Sequence[ToolResponse | Mapping[str, Any]] = (),
               approvals: Sequence[ApprovalDecision | Mapping[str, Any]] = (), stream: Literal[False] = False,
               idempotency_key: str | None = None, provider_data: Mapping[str, Any] | None = None,
               webhook: str | None = None) -> Turn: ...  # fmt: skip

    @overload
    def resume(self, agent_id: str, session_id: str, turn_id: str, *,
               tool_responses: Sequence[ToolResponse | Mapping[str, Any]] = (),
               approvals: Sequence[ApprovalDecision | Mapping[str, Any]] = (), stream: Literal[True],
               idempotency_key: str | None = None, provider_data: Mapping[str, Any] | None = None,
               webhook: str | None = None) -> Stream[TurnData]: ...  # fmt: skip

    def resume(self, agent_id: str, session_id: str, turn_id: str, *,
               tool_responses: Sequence[ToolResponse | Mapping[str, Any]] = (),
               approvals: Sequence[ApprovalDecision | Mapping[str, Any]] = (), stream: bool = False,
               idempotency_key: str | None = None, provider_data: Mapping[str, Any] | None = None,
               webhook: str | None = None) -> Turn | Stream[TurnData]:  # fmt: skip
        """Continue a turn waiting for client tool results or approvals: the ``Turn``, or its events.

        A resume is a run of its own: ``webhook`` gets its end (the turn's earlier webhook is not used for it).
        """
        plan = _resume_turn(agent_id, session_id, turn_id, stream, idempotency_key, provider_data,
                            tool_responses=tool_responses, approvals=approvals, webhook=webhook)  # fmt: skip
        if stream:
            return Stream(self._transport, plan, TurnStreamKind(agent_id, session_id, turn_id))
        return self._transport.call(Call(plan, model(Turn)))

    def retrieve(self, agent_id: str, session_id: str, turn_id: str) -> Turn:
        """One turn."""
        return self._transport.call(_retrieve_turn(agent_id, session_id, turn_id))

    def events(
        self, agent_id: str, session_id: str, turn_id: str, *, after: int | None = None, through_pauses: bool = False
    ) -> Stream[TurnData]:
        """A turn's events from the start (or after event number ``after``), live until it ends or pauses.

        With ``through_pauses`` the stream reads on past ``turn_awaiting_input``: a turn that was paused
        and resumed replays whole, every run of it, ending where the server's record of it ends.
        """
        kind = TurnStreamKind(agent_id, session_id, turn_id, through_pauses=through_pauses)
        return Stream(self._transport, _turn_events(agent_id, session_id, turn_id, after), kind)


class Steps(SyncResource):
    """``client.agents.steps``."""

    def retrieve(self, agent_id: str, session_id: str, turn_id: str, step_id: str) -> Step:
        """One step of a turn."""
        return self._transport.call(_retrieve_step(agent_id, session_id, turn_id, step_id)).step


class AsyncAgents(AsyncResource):
    """``client.agents`` of an ``AsyncClient``: agents, with ``sessions``, ``turns`` and ``steps`` beneath."""

    def __init__(self, transport: AsyncTransport) -> None:
        super().__init__(transport)
        self.sessions = AsyncSessions(transport)
        self.turns = AsyncTurns(transport)
        self.steps = AsyncSteps(transport)

    async def create(self, agent_config: AgentConfig | Mapping[str, Any]) -> AgentCreated:
        """Create an agent; the answer carries its ``agent_id``."""
        return await self._transport.call(_create_agent(agent_config))

    async def retrieve(self, agent_id: str) -> Agent:
        """One agent."""
        return await self._transport.call(_retrieve_agent(agent_id))

    async def list(self, *, start_index: int = 0, limit: int | None = None) -> AsyncPage[Agent]:
        """The agents, a page at a time (``async for`` over the page for all of them)."""
        return await AsyncPage.fetch(self._transport, _list_agents(start_index, limit), by_position(Agent))

    async def delete(self, agent_id: str) -> None:
        """Delete an agent with its sessions."""
        await self._transport.call(_delete_agent(agent_id))


class AsyncSessions(AsyncResource):
    """``client.agents.sessions`` of an ``AsyncClient``."""

    async def create(self, agent_id: str, *, session_name: str) -> SessionCreated:
        """Open a session with an agent; the answer carries its ``session_id``."""
        return await self._transport.call(_create_session(agent_id, session_name))

    async def retrieve(self, agent_id: str, session_id: str, *, turn_ids: Sequence[str] | None = None) -> Session:
        """A session with its turns (only ``turn_ids`` if given)."""
        return await self._transport.call(_retrieve_session(agent_id, session_id, turn_ids))

    async def list(self, agent_id: str, *, start_index: int = 0, limit: int | None = None) -> AsyncPage[Session]:
        """An agent's sessions, a page at a time."""
        plan = _list_sessions(agent_id, start_index, limit)
        return await AsyncPage.fetch(self._transport, plan, by_position(Session))

    async def delete(self, agent_id: str, session_id: str) -> None:
        """Delete a session."""
        await self._transport.call(_delete_session(agent_id, session_id))

    async def fork(self, agent_id: str, session_id: str, *, turn_id: str,
                   session_name: str | None = None) -> SessionCreated:  # fmt: skip
        """A new session whose history is this one's up to and including ``turn_id``; the original is untouched."""
        return await self._transport.call(_fork_session(agent_id, session_id, turn_id, session_name))


class AsyncTurns(AsyncResource):
    """``client.agents.turns`` of an ``AsyncClient``."""

    @overload
    async def create(self, agent_id: str, session_id: str, *, messages: Messages, stream: Literal[False] = False,
                     documents: Sequence[Document | Mapping[str, Any]] | None = None,
                     toolgroups: Toolgroups | None = None, tool_config: ToolConfig | Mapping[str, Any] | None = None,
                     idempotency_key: str | None = None, provider_data: Mapping[str, Any] | None = None,
                     multitask_strategy: MultitaskStrategy | None = None,
                     webhook: str | None = None) -> Turn: ...  # fmt: skip

    @overload
    async def create(self, agent_id: str, session_id: str, *, messages: Messages, stream: Literal[True],
                     documents: Sequence[Document | Mapping[str, Any]] | None = None,
                     toolgroups: Toolgroups | None = None, tool_config: ToolConfig | Mapping[str, Any] | None = None,
                     idempotency_key: str | None = None, provider_data: Mapping[str, Any] | None = None,
                     multitask_strategy: MultitaskStrategy | None = None,
                     webhook: str | None = None) -> AsyncStream[TurnData]: ...  # fmt: skip

    async def create(self, agent_id: str, session_id: str, *, messages: Messages, stream: bool = False,
                     documents: Sequence[Document | Mapping[str, Any]] | None = None,
                     toolgroups: Toolgroups | None = None, tool_config: ToolConfig | Mapping[str, Any] | None = None,
                     idempotency_key: str | None = None, provider_data: Mapping[str, Any] | None = None,
                     multitask_strategy: MultitaskStrategy | None = None,
                     webhook: str | None = None) -> Turn | AsyncStream[TurnData]:  # fmt: skip
        """Run a turn: the finished ``Turn``, or (``stream=True``) its events as they happen (see ``Turns``)."""
        plan = _create_turn(agent_id, session_id, stream, idempotency_key, provider_data, messages=messages,
                            documents=documents, toolgroups=toolgroups, tool_config=tool_config,
                            multitask_strategy=multitask_strategy, webhook=webhook)  # fmt: skip
        if stream:
            return AsyncStream(self._transport, plan, TurnStreamKind(agent_id, session_id))
        return await self._transport.call(Call(plan, model(Turn)))

    @overload
    async def resume(self, agent_id: str, session_id: str, turn_id: str, *,
                     tool_responses: Sequence[ToolResponse | Mapping[str, Any]] = (),
                     approvals: Sequence[ApprovalDecision | Mapping[str, Any]] = (), stream: Literal[False] = False,
                     idempotency_key: str | None = None, provider_data: Mapping[str, Any] | None = None,
                     webhook: str | None = None) -> Turn: ...  # fmt: skip

    @overload
    async def resume(self, agent_id: str, session_id: str, turn_id: str, *,
                     tool_responses: Sequence[ToolResponse | Mapping[str, Any]] = (),
                     approvals: Sequence[ApprovalDecision | Mapping[str, Any]] = (), stream: Literal[True],
                     idempotency_key: str | None = None, provider_data: Mapping[str, Any] | None = None,
                     webhook: str | None = None) -> AsyncStream[TurnData]: ...  # fmt: skip

    async def resume(self, agent_id: str, session_id: str, turn_id: str, *,
                     tool_responses: Sequence[ToolResponse | Mapping[str, Any]] = (),
                     approvals: Sequence[ApprovalDecision | Mapping[str, Any]] = (), stream: bool = False,
                     idempotency_key: str | None = None, provider_data: Mapping[str, Any] | None = None,
                     webhook: str | None = None) -> Turn | AsyncStream[TurnData]:  # fmt: skip
        """Continue a turn waiting for client tool results or approvals (see :meth:`Turns.resume`)."""
        plan = _resume_turn(agent_id, session_id, turn_id, stream, idempotency_key, provider_data,
                            tool_responses=tool_responses, approvals=approvals, webhook=webhook)  # fmt: skip
        if stream:
            return AsyncStream(self._transport, plan, TurnStreamKind(agent_id, session_id, turn_id))
        return await self._transport.call(Call(plan, model(Turn)))

    async def retrieve(self, agent_id: str, session_id: str, turn_id: str) -> Turn:
        """One turn."""
        return await self._transport.call(_retrieve_turn(agent_id, session_id, turn_id))

    def events(
        self, agent_id: str, session_id: str, turn_id: str, *, after: int | None = None, through_pauses: bool = False
    ) -> AsyncStream[TurnData]:
        """A turn's events (see :meth:`Turns.events`)."""
        kind = TurnStreamKind(agent_id, session_id, turn_id, through_pauses=through_pauses)
        return AsyncStream(self._transport, _turn_events(agent_id, session_id, turn_id, after), kind)


class AsyncSteps(AsyncResource):
    """``client.agents.steps`` of an ``AsyncClient``."""

    async def retrieve(self, agent_id: str, session_id: str, turn_id: str, step_id: str) -> Step:
        """One step of a turn."""
        return (await self._transport.call(_retrieve_step(agent_id, session_id, turn_id, step_id))).step
