"""``Agent`` and ``AsyncAgent``: an agent stored on the server, its sessions and turns, client tools run locally.

Both are thin shells over one sans-I/O state machine
(:mod:`ferryman.client._agent_flow`): the shell makes the calls the flow names,
feeds it what the server sends, runs the client tools and asks for approvals;
the flow turns the server's events into :mod:`ferryman.client.events` and
names the call that resumes the same turn.

Approvals: a server tool call that waits for approval is put to the agent's
``on_approval`` callback (True runs it, False refuses it). Without a callback
every such call is refused, and the model is told so: a tool the caller did
not approve never runs by default.

Failures: a turn that ends in failure on the server (cancelled and
interrupted turns included) raises :class:`~ferryman.client.TurnFailedError`,
which carries the server's failure code. Streamed, the turn's
:class:`~ferryman.client.events.TurnFailed` event is yielded first, and the
error is raised when the iteration goes on past it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, Self, overload

from ferryman.api.agents import Document, MultitaskStrategy, Turn
from ferryman.api.approvals import ApprovalDecision, ApprovalRequest
from ferryman.api.content import ToolCall, ToolResponse
from ferryman.api.responses import Response

from ._agent_flow import ClientCall, TurnFlow
from ._agent_setup import AgentSetup, Api, ApprovalCallback, MessagesInput, ToolSpec
from ._client import AsyncClient, Client
from .errors import APIStatusError
from .events import AgentEvent, TurnCompleted
from .tools import ClientTool, run_blocking

__all__ = ["Agent", "AsyncAgent"]

DEFAULT_SESSION_NAME = "session"


class Agent:
    """An agent on a ferryman server, run from this process.

    Args:
        client: The client of the server.
        model: The model's id.
        instructions: The system instructions.
        tools: Client tools (``@client_tool`` functions, or plain functions with type hints),
            toolgroup references (``"builtin::math"``, ``{"name": ..., "args": ...}``) and, with
            ``api="responses"``, Responses tool dicts (``{"type": "web_search"}``).
        api: ``"agents"`` stores the agent and runs turns on the Agents API; ``"responses"`` runs
            each turn as responses in a server conversation (one per session).
        on_approval: Decides each server tool call that waits for approval; without it they are refused.
        response_options: More fields of every response (``temperature``, ``max_tool_calls``…), ``api="responses"``.
        **agent_config: More fields of the agent's configuration (``sampling_params``, ``max_infer_iters``,
            ``input_shields``, ``response_format``, ``require_approval``…); with ``api="responses"`` only
            ``response_format``, ``require_approval``, ``tool_choice`` and ``name``.

    Raises:
        ValueError: A tool or option has no form on the chosen API.
    """

    def __init__(
        self,
        client: Client,
        model: str,
        instructions: str = "",
        tools: Sequence[ToolSpec] = (),
        *,
        api: Api = "agents",
        on_approval: ApprovalCallback | None = None,
        response_options: Mapping[str, Any] | None = None,
        **agent_config: Any,
    ) -> None:
        self.client = client
        self.setup = AgentSetup(model, instructions, tools, api, on_approval, agent_config, response_options)
        self.agent_id: str | None = None
        if api == "agents":
            self.agent_id = client.agents.create(self.setup.config()).agent_id
        self.sessions: list[str] = []

    @classmethod
    def attach(
        cls,
        client: Client,
        agent_id: str,
        tools: Sequence[ClientTool | Callable[..., Any]] = (),
        *,
        on_approval: ApprovalCallback | None = None,
    ) -> Self:
        """The agent ``agent_id`` already stored on the server, its turns run from this process.

        Args:
            client: The client of the server.
            agent_id: The stored agent.
            tools: The client tools to run, among those the agent declares; a call of a declared
                tool not given here is answered with an error the model reads.
            on_approval: Decides each server tool call that waits for approval; without it they are refused.

        Returns:
            The agent, its configuration as stored (nothing is stored again).

        Raises:
            NotFoundError: No such agent (or not the caller's).
            ValueError: A tool is not one of the agent's client tools.
        """
        setup = AgentSetup.attached(client.agents.retrieve(agent_id).agent_config, tools, on_approval)
        agent = cls.__new__(cls)
        agent.client, agent.setup, agent.agent_id, agent.sessions = client, setup, agent_id, []
        return agent

    def create_session(self, session_name: str = DEFAULT_SESSION_NAME) -> str:
        """Open a session (a conversation with ``api="responses"``); later turns default to it.

        Returns:
            The session's (or conversation's) id.
        """
        created = _invoke(self.client, self.setup.session_call(self.agent_id, session_name))
        self.sessions.append(self.setup.session_id(created))
        return self.sessions[-1]

    @overload
    def create_turn(
        self, messages: MessagesInput, session_id: str | None = None, *, stream: Literal[True] = True,
        documents: Sequence[Document | Mapping[str, Any]] | None = None,
        multitask_strategy: MultitaskStrategy | None = None, webhook: str | None = None,
    ) -> Iterator[AgentEvent]: ...  # fmt: skip

    @overload
    def create_turn(
        self, messages: MessagesInput, session_id: str | None = None, *, stream: Literal[False],
        documents: Sequence[Document | Mapping[str, Any]] | None = None,
        multitask_strategy: MultitaskStrategy | None = None, webhook: str | None = None,
    ) -> Turn | Response: ...  # fmt: skip

    def create_turn(
        self,
        messages: MessagesInput,
        session_id: str | None = None,
        *,
        stream: bool = True,
        documents: Sequence[Document | Mapping[str, Any]] | None = None,
        multitask_strategy: MultitaskStrategy | None = None,
        webhook: str | None = None,
    ) -> Iterator[AgentEvent] | Turn | Response:
        """Run a turn to its end, running client tools and resuming the same turn as often as it asks.

        Args:
            messages: The user's text, or the turn's messages.
            session_id: The session; the last one this agent opened by default.
            stream: Yield the turn's events as they happen; otherwise return its final object.
            documents: Documents given to the model with the messages.
            multitask_strategy: What the turn does while another runs in the session (``reject``, the server's
                default; ``enqueue``, ``interrupt``, ``rollback``); with ``api="responses"`` it goes with the
                turn's first response.
            webhook: An ``http(s)`` URL the server posts a signed event to when each run of the turn ends: its
                create and every resume (``turn.*`` events), or with ``api="responses"`` each response
                (``response.*`` events).

        Returns:
            The events (``stream=True``); else the finished ``Turn`` (Agents API) or last ``Response``.

        Raises:
            TurnFailedError: The turn failed (streamed: once the iteration goes on past its ``TurnFailed`` event).
        """
        session = _session_of(self.sessions, session_id)
        events = self._turn(
            messages, session, documents, stream, multitask_strategy=multitask_strategy, webhook=webhook
        )
        if stream:
            return events
        last: AgentEvent | None = None
        for event in events:
            last = event
        return _result(last)

    def _turn(
        self,
        messages: MessagesInput,
        session_id: str,
        documents: Sequence[Document | Mapping[str, Any]] | None,
        stream: bool,
        *,
        multitask_strategy: MultitaskStrategy | None = None,
        webhook: str | None = None,
    ) -> Iterator[AgentEvent]:
        """The events of one turn, the last a ``TurnCompleted`` (what a subclass changes of a turn)."""
        flow = self.setup.flow(self.agent_id, session_id, messages, documents, stream, multitask_strategy, webhook)
        return self._drive(flow, stream)

    def _drive(self, flow: TurnFlow, stream: bool) -> Iterator[AgentEvent]:
        call = flow.first_call()
        while True:
            if stream:
                with _invoke(self.client, call) as events:
                    for event in events:
                        yield from flow.on_event(event.data)
            else:
                try:
                    answered = flow.on_result(_invoke(self.client, call))
                except APIStatusError as exc:
                    answered = flow.rejected(exc)
                yield from answered
            pending = flow.pending
            if pending is None:
                break
            responses = [self._run(c) for c in pending.tool_calls]
            decisions = [self._decide(r) for r in pending.approvals]
            events, call = flow.answer(responses, decisions)
            yield from events
        failure = flow.failure
        if failure is not None:
            raise failure

    def _run(self, call: ToolCall) -> ToolResponse:
        tool = self.setup.tool_for(call)
        return tool.run(call) if tool else self.setup.unknown_tool(call)

    def _decide(self, request: ApprovalRequest) -> ApprovalDecision:
        if self.setup.on_approval is None:
            return self.setup.decision(request, None)
        verdict = self.setup.on_approval(request)
        if inspect.isawaitable(verdict):
            verdict = run_blocking(_awaited(verdict))
        return self.setup.decision(request, bool(verdict))


class AsyncAgent:
    """:class:`Agent` over an :class:`~ferryman.client.AsyncClient`.

    The agent is stored on the server by :meth:`initialize`, which the first
    :meth:`create_session` calls when it was not awaited before. Plain-function
    client tools run in a worker thread; ``on_approval`` may be a coroutine function.
    Arguments as for :class:`Agent`.
    """

    def __init__(
        self,
        client: AsyncClient,
        model: str,
        instructions: str = "",
        tools: Sequence[ToolSpec] = (),
        *,
        api: Api = "agents",
        on_approval: ApprovalCallback | None = None,
        response_options: Mapping[str, Any] | None = None,
        **agent_config: Any,
    ) -> None:
        self.client = client
        self.setup = AgentSetup(model, instructions, tools, api, on_approval, agent_config, response_options)
        self.agent_id: str | None = None
        self.sessions: list[str] = []

    @classmethod
    async def attach(
        cls,
        client: AsyncClient,
        agent_id: str,
        tools: Sequence[ClientTool | Callable[..., Any]] = (),
        *,
        on_approval: ApprovalCallback | None = None,
    ) -> Self:
        """The agent ``agent_id`` already stored on the server (see :meth:`Agent.attach`)."""
        stored = await client.agents.retrieve(agent_id)
        setup = AgentSetup.attached(stored.agent_config, tools, on_approval)
        agent = cls.__new__(cls)
        agent.client, agent.setup, agent.agent_id, agent.sessions = client, setup, agent_id, []
        return agent

    async def initialize(self) -> None:
        """Store the agent on the server (Agents API); nothing to store with ``api="responses"``."""
        if self.setup.api == "agents" and self.agent_id is None:
            self.agent_id = (await self.client.agents.create(self.setup.config())).agent_id

    async def create_session(self, session_name: str = DEFAULT_SESSION_NAME) -> str:
        """Open a session (a conversation with ``api="responses"``); later turns default to it."""
        await self.initialize()
        created = await _invoke(self.client, self.setup.session_call(self.agent_id, session_name))
        self.sessions.append(self.setup.session_id(created))
        return self.sessions[-1]

    @overload
    async def create_turn(
        self, messages: MessagesInput, session_id: str | None = None, *, stream: Literal[True] = True,
        documents: Sequence[Document | Mapping[str, Any]] | None = None,
        multitask_strategy: MultitaskStrategy | None = None, webhook: str | None = None,
    ) -> AsyncIterator[AgentEvent]: ...  # fmt: skip

    @overload
    async def create_turn(
        self, messages: MessagesInput, session_id: str | None = None, *, stream: Literal[False],
        documents: Sequence[Document | Mapping[str, Any]] | None = None,
        multitask_strategy: MultitaskStrategy | None = None, webhook: str | None = None,
    ) -> Turn | Response: ...  # fmt: skip

    async def create_turn(
        self,
        messages: MessagesInput,
        session_id: str | None = None,
        *,
        stream: bool = True,
        documents: Sequence[Document | Mapping[str, Any]] | None = None,
        multitask_strategy: MultitaskStrategy | None = None,
        webhook: str | None = None,
    ) -> AsyncIterator[AgentEvent] | Turn | Response:
        """Run a turn to its end (see :meth:`Agent.create_turn`); ``async for`` over the awaited events.

        Raises:
            TurnFailedError: The turn failed (streamed: once the iteration goes on past its ``TurnFailed`` event).
        """
        await self.initialize()
        session = _session_of(self.sessions, session_id)
        events = self._turn(
            messages, session, documents, stream, multitask_strategy=multitask_strategy, webhook=webhook
        )
        if stream:
            return events
        last: AgentEvent | None = None
        async for event in events:
            last = event
        return _result(last)

    def _turn(
        self,
        messages: MessagesInput,
        session_id: str,
        documents: Sequence[Document | Mapping[str, Any]] | None,
        stream: bool,
        *,
        multitask_strategy: MultitaskStrategy | None = None,
        webhook: str | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """The events of one turn, the last a ``TurnCompleted`` (what a subclass changes of a turn)."""
        flow = self.setup.flow(self.agent_id, session_id, messages, documents, stream, multitask_strategy, webhook)
        return self._drive(flow, stream)

    async def _drive(self, flow: TurnFlow, stream: bool) -> AsyncIterator[AgentEvent]:
        call = flow.first_call()
        while True:
            if stream:
                async with await _invoke(self.client, call) as events:
                    async for event in events:
                        for typed in flow.on_event(event.data):
                            yield typed
            else:
                try:
                    answered = flow.on_result(await _invoke(self.client, call))
                except APIStatusError as exc:
                    answered = flow.rejected(exc)
                for typed in answered:
                    yield typed
            pending = flow.pending
            if pending is None:
                break
            responses = [await self._run(c) for c in pending.tool_calls]
            decisions = [await self._decide(r) for r in pending.approvals]
            answered, call = flow.answer(responses, decisions)
            for typed in answered:
                yield typed
        failure = flow.failure
        if failure is not None:
            raise failure

    async def _run(self, call: ToolCall) -> ToolResponse:
        tool = self.setup.tool_for(call)
        return await tool.arun(call) if tool else self.setup.unknown_tool(call)

    async def _decide(self, request: ApprovalRequest) -> ApprovalDecision:
        if self.setup.on_approval is None:
            return self.setup.decision(request, None)
        verdict = self.setup.on_approval(request)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return self.setup.decision(request, bool(verdict))


def _session_of(sessions: list[str], session_id: str | None) -> str:
    """The session a turn runs in: the one given, else the agent's last."""
    if session_id is not None:
        return session_id
    if not sessions:
        raise ValueError("no session: call create_session() first or pass session_id")
    return sessions[-1]


def _result(last: AgentEvent | None) -> Turn | Response:
    """The final object of a turn whose events ended with ``last``."""
    if not isinstance(last, TurnCompleted):
        raise RuntimeError(f"the turn's events ended with {last!r}, not with its completion")
    return last.result


def _invoke(client: Client | AsyncClient, call: ClientCall) -> Any:
    """Call the client's method that ``call`` names (a coroutine on an ``AsyncClient``)."""
    method: Any = client
    for name in call.target:
        method = getattr(method, name)
    return method(**call.kwargs)


async def _awaited(value: Any) -> Any:
    return await value
