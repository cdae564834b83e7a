"""The seam of the Responses API's hosted tools: how a request's tool binds, and how its calls show.

A hosted tool (``file_search``, ``mcp``, ``code_interpreter``, ``web_search``)
is a tool of the request that the server runs itself. Each kind provides

* a :class:`HostedKind`: it checks the request's tools of its kind and binds
  them to the server tools the engine runs (:class:`Binding`), and
* a :class:`CallRenderer` per tool name the model may call: it turns a call
  into its output item, with the item's progress events while it runs and
  its final form from the tool's result, and
* a :data:`Replay` per item type: it turns a stored item back into the call and
  output the model read, when a later response continues the conversation
  (``replay.py`` holds the table).

The encoder (``stream.py``) and the planner (``plan.py``) look both up by name;
neither knows any kind.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ferryman.api.content import ToolCall, ToolResponse, content_to_text
from ferryman.api.response_events import CallEvent
from ferryman.api.responses import HostedCallItem, HostedTool, Item
from ferryman.engine.unlisted import UnlistedTools
from ferryman.tools.registry import BoundTool

from ..citations import Sources
from ..ids import new_item_id

Progress = tuple[type[CallEvent], dict[str, Any]]
"""A progress event of an item: its type, and its fields beyond the sequence number, item id and output index."""


class CallRenderer(Protocol):
    """How the calls of one hosted tool become output items."""

    item_type: str
    """The type of the items it makes (their ids are prefixed after it)."""

    def started(self, call: ToolCall, item_id: str) -> tuple[HostedCallItem, list[Progress]]:
        """The item of a call the engine starts running, and the events that announce it."""
        ...

    def finished(
        self, item: HostedCallItem, response: ToolResponse, sources: Sources
    ) -> tuple[HostedCallItem, list[Progress]]:
        """The item once the call returned, and the events before its ``output_item.done``.

        Args:
            item: The item :meth:`started` made.
            response: The tool's response (``metadata["error"]`` set when the call failed).
            sources: The response's search results; a search adds the sources it found, for citing.
        """
        ...


@dataclass(frozen=True)
class Replayed:
    """A stored call item as the model read it: its call of the tool, and the tool's output."""

    call: ToolCall
    output: str


Replay = Callable[[Any], Replayed | None]
"""How one item type is replayed to the model (None: the item was never the model's to read)."""


def replayed_call(item_id: str | None, kind: str, tool_name: str, arguments: dict[str, Any] | str) -> ToolCall:
    """The model's call of a hosted tool, rebuilt from its item (the item's id stands for the call's)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(call_id=item_id or new_item_id(kind), tool_name=tool_name, arguments=arguments, arguments_json=text)


@dataclass(frozen=True)
class Announced:
    """An item made before the turn ran (an MCP server's tool listing), with the events that announce it."""

    item: Item
    progress: list[Progress]


@dataclass
class Binding:
    """What a request's hosted tools become: tools for the engine, renderers for their calls, announcements."""

    server_tools: dict[str, BoundTool] = field(default_factory=dict)
    renderers: dict[str, CallRenderer] = field(default_factory=dict)
    announced: list[Announced] = field(default_factory=list)
    held: dict[str, str | None] = field(default_factory=dict)
    """Tools whose calls wait for the client's approval, with the ``server_label`` their requests show
    (None: ``"ferryman"``); a kind fills it from its tool's ``require_approval`` (see ``engine/approvals.py``)."""
    unlisted: list[UnlistedTools] = field(default_factory=list)
    """Servers whose tools could not be listed (each also announced as a failed item); the model is told."""

    def add(self, name: str, tool: BoundTool, renderer: CallRenderer) -> None:
        """Offer ``tool`` to the model as ``name``, its calls shown by ``renderer``."""
        self.server_tools[name] = tool
        self.renderers[name] = renderer

    def merge(self, other: Binding) -> None:
        """Add another kind's binding."""
        self.server_tools.update(other.server_tools)
        self.renderers.update(other.renderers)
        self.announced.extend(other.announced)
        self.held.update(other.held)
        self.unlisted.extend(other.unlisted)


@dataclass(frozen=True)
class BindContext:
    """What binding a request's hosted tools may need besides the tools themselves.

    Attributes:
        session_id: The session the response runs in (its conversation's, or its own).
        include: The request's ``include`` values.
        taken: Tool names already offered to the model (function tools, other hosted tools).
        prior: Items of the conversation or the ``previous_response_id`` chain, and the request's input.
        chain_session: Gives the session whose state the response shares (a code interpreter's kernel):
            its conversation's, else the first response's of its ``previous_response_id`` chain, else its own.
            Asked for only by a kind that keeps such state (finding a chain's first response reads the chain).
    """

    session_id: str
    include: frozenset[str]
    taken: frozenset[str]
    prior: list[Item]
    chain_session: Callable[[], Awaitable[str]]


class HostedKind(Protocol):
    """One kind of hosted tool, on the request side."""

    names: frozenset[str]
    """The fixed names its tools take (none for a kind whose names come from elsewhere)."""

    uses_prior: bool
    """Whether binding reads the items before the response (:attr:`BindContext.prior`)."""

    def validate(self, tools: list[HostedTool]) -> None:
        """Check the request's tools of this kind (before anything is stored).

        Raises:
            InvalidRequestError: the tools cannot be offered together, or the server does not offer the kind.
        """
        ...

    async def check(self, tools: list[HostedTool]) -> None:
        """Check what the tools name exists and the caller may use it.

        Raises:
            FerrymanError: the typed error of what is wrong (404 for a record the caller may not read).
        """
        ...

    async def bind(self, tools: list[HostedTool], context: BindContext) -> Binding:
        """The server tools the model may call for the request's tools of this kind."""
        ...


def failed(response: ToolResponse) -> bool:
    """Whether a tool's response reports a failure."""
    return bool((response.metadata or {}).get("error"))


def output_text(response: ToolResponse) -> str:
    """A tool's response as text."""
    return content_to_text(response.content)
