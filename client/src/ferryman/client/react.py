"""``ReActAgent`` and ``AsyncReActAgent``: reason, act, observe, as an :class:`~ferryman.client.Agent`'s turn.

The model answers every turn of the server with one JSON object
(:class:`ReActStep`, asked for through the agent's ``response_format``): a
thought, then either an action (a client tool and its arguments) or the final
answer. The agent runs the action's tool here and sends what it returned as
the next turn's message, until the model answers or ``max_iterations`` turns
ran. Output that does not fit the format is sent back as the observation, so
the model can correct itself.

For the caller, ``create_turn`` is one turn, as with an ``Agent``: its
events carry one ``turn_id``, each action is a client ``tool_execution``
step, and the ``TurnCompleted`` event's ``output_text`` is the answer. The
loop itself is :class:`~ferryman.client._react_flow.ReActLoop`, without I/O;
these classes only run its turns and tools.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Self

from ferryman.api.agents import Document, MultitaskStrategy

from ._agent_setup import Api, ApprovalCallback, MessagesInput
from ._client import AsyncClient, Client
from ._react_flow import (
    DEFAULT_MAX_ITERATIONS,
    INSTRUCTIONS,
    RESPONSE_FORMAT,
    ReActAction,
    ReActIteration,
    ReActLoop,
    ReActResult,
    ReActStep,
    ReActTools,
    default_instructions,
)
from .agent import Agent, AsyncAgent
from .events import AgentEvent
from .tools import ClientTool

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "INSTRUCTIONS",
    "AsyncReActAgent",
    "ReActAction",
    "ReActAgent",
    "ReActIteration",
    "ReActResult",
    "ReActStep",
    "default_instructions",
]

_Tools = Sequence[ClientTool | Callable[..., Any]]


class ReActAgent(Agent):
    """An :class:`~ferryman.client.Agent` that runs a ReAct loop with client tools in each turn.

    Args:
        client: The client of the server.
        model: The model's id.
        instructions: The system instructions; by default ReAct's format and the tools' descriptions.
        tools: The client tools the model may act with (``@client_tool`` or plain typed functions); they
            are described in the instructions, not offered to the model as tools.
        api: The API the agent's turns run on (see :class:`~ferryman.client.Agent`).
        on_approval: Decides each server tool call that waits for approval; without it they are refused.
        response_options: More fields of every response, ``api="responses"``.
        max_iterations: The most turns of the server one ``create_turn`` (or :meth:`run`) takes.
        **agent_config: More fields of the agent's configuration (as for ``Agent``).

    Raises:
        ValueError: A tool is not a client tool, or an option has no form on the chosen API.
        TypeError: ``instructions`` is not text.
    """

    def __init__(
        self,
        client: Client,
        model: str,
        instructions: str | None = None,
        tools: _Tools = (),
        *,
        api: Api = "agents",
        on_approval: ApprovalCallback | None = None,
        response_options: Mapping[str, Any] | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        **agent_config: Any,
    ) -> None:
        self.react = ReActTools(tools, max_iterations)
        super().__init__(
            client,
            model,
            self.react.instructions(instructions),
            api=api,
            on_approval=on_approval,
            response_options=response_options,
            response_format=RESPONSE_FORMAT,
            **agent_config,
        )

    @classmethod
    def attach(
        cls,
        client: Client,
        agent_id: str,
        tools: _Tools = (),
        *,
        on_approval: ApprovalCallback | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
    ) -> Self:
        """The ReAct agent ``agent_id`` already stored on the server, acting with ``tools`` from this process.

        Args:
            client: The client of the server.
            agent_id: The stored agent (created by a ``ReActAgent``: its instructions describe the tools).
            tools: The client tools the model may act with.
            on_approval: Decides each server tool call that waits for approval; without it they are refused.
            max_iterations: The most turns of the server one ``create_turn`` takes.

        Returns:
            The agent, its configuration as stored.
        """
        react = ReActTools(tools, max_iterations)
        agent = super().attach(client, agent_id, on_approval=on_approval)
        agent.react = react
        return agent

    @property
    def tools(self) -> dict[str, ClientTool]:
        """The client tools the model acts with, by name."""
        return self.react.tools

    def run(
        self, task: str, session_id: str | None = None, on_event: Callable[[AgentEvent], None] | None = None
    ) -> ReActResult:
        """Loop until the model answers the task; every step of the loop comes back.

        Args:
            task: The user's task.
            session_id: The session to run in; a new one by default.
            on_event: Called with each event of the turn (which streams when it is given).

        Returns:
            The answer (None when ``max_iterations`` came first) and each iteration.

        Raises:
            TurnFailedError: A turn of the server failed.
        """
        session = session_id or self.create_session("react")
        loop = self.react.loop(task)
        for event in self._loop(loop, session, None, stream=on_event is not None):
            if on_event is not None:
                on_event(event)
        return loop.result(session)

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
        return self._loop(self.react.loop(messages), session_id, documents, stream, multitask_strategy, webhook)

    def _loop(
        self,
        loop: ReActLoop,
        session_id: str,
        documents: Sequence[Document | Mapping[str, Any]] | None,
        stream: bool,
        multitask_strategy: MultitaskStrategy | None = None,
        webhook: str | None = None,
    ) -> Iterator[AgentEvent]:
        while (message := loop.next_message()) is not None:
            turn = super()._turn(
                message, session_id, documents, stream, multitask_strategy=multitask_strategy, webhook=webhook
            )
            for event in turn:
                yield from loop.on_event(event)
            documents = multitask_strategy = None  # given with the task only; the webhook gets every turn's end
            if loop.action is not None:
                tool = loop.tool_for(loop.action)
                yield from loop.observe(tool.run(loop.action) if tool else loop.unknown_tool(loop.action))
        yield from loop.finish()


class AsyncReActAgent(AsyncAgent):
    """:class:`ReActAgent` over an :class:`~ferryman.client.AsyncClient` (arguments as for it).

    Plain-function tools run in a worker thread; ``run`` and ``create_turn`` are awaited as
    :class:`~ferryman.client.AsyncAgent`'s are.
    """

    def __init__(
        self,
        client: AsyncClient,
        model: str,
        instructions: str | None = None,
        tools: _Tools = (),
        *,
        api: Api = "agents",
        on_approval: ApprovalCallback | None = None,
        response_options: Mapping[str, Any] | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        **agent_config: Any,
    ) -> None:
        self.react = ReActTools(tools, max_iterations)
        super().__init__(
            client,
            model,
            self.react.instructions(instructions),
            api=api,
            on_approval=on_approval,
            response_options=response_options,
            response_format=RESPONSE_FORMAT,
            **agent_config,
        )

    @classmethod
    async def attach(
        cls,
        client: AsyncClient,
        agent_id: str,
        tools: _Tools = (),
        *,
        on_approval: ApprovalCallback | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
    ) -> Self:
        """The ReAct agent ``agent_id`` already stored on the server (see :meth:`ReActAgent.attach`)."""
        react = ReActTools(tools, max_iterations)
        agent = await super().attach(client, agent_id, on_approval=on_approval)
        agent.react = react
        return agent

    @property
    def tools(self) -> dict[str, ClientTool]:
        """The client tools the model acts with, by name."""
        return self.react.tools

    async def run(
        self, task: str, session_id: str | None = None, on_event: Callable[[AgentEvent], None] | None = None
    ) -> ReActResult:
        """Loop until the model answers the task (see :meth:`ReActAgent.run`)."""
        session = session_id or await self.create_session("react")
        loop = self.react.loop(task)
        async for event in self._loop(loop, session, None, stream=on_event is not None):
            if on_event is not None:
                on_event(event)
        return loop.result(session)

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
        return self._loop(self.react.loop(messages), session_id, documents, stream, multitask_strategy, webhook)

    async def _loop(
        self,
        loop: ReActLoop,
        session_id: str,
        documents: Sequence[Document | Mapping[str, Any]] | None,
        stream: bool,
        multitask_strategy: MultitaskStrategy | None = None,
        webhook: str | None = None,
    ) -> AsyncIterator[AgentEvent]:
        while (message := loop.next_message()) is not None:
            turn = super()._turn(
                message, session_id, documents, stream, multitask_strategy=multitask_strategy, webhook=webhook
            )
            async for event in turn:
                for shown in loop.on_event(event):
                    yield shown
            documents = multitask_strategy = None  # given with the task only; the webhook gets every turn's end
            if loop.action is not None:
                tool = loop.tool_for(loop.action)
                response = await tool.arun(loop.action) if tool else loop.unknown_tool(loop.action)
                for shown in loop.observe(response):
                    yield shown
        for shown in loop.finish():
            yield shown
