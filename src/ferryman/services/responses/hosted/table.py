"""The one table from a request's hosted tool to its kind: validation, checks and binding go through it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from ferryman.api.responses import CreateResponseRequest, FunctionTool, HostedTool, Item
from ferryman.errors import InvalidRequestError

from .base import BindContext, Binding, HostedKind


class HostedTools:
    """The hosted tools this server offers, each kind keyed by its request tool's model class.

    Args:
        kinds: The kinds offered; binding follows this order, so a kind whose names
            give way on a clash (``mcp``) comes last.
    """

    def __init__(self, kinds: Mapping[type[HostedTool], HostedKind]) -> None:
        self._kinds = dict(kinds)

    def _grouped(self, request: CreateResponseRequest) -> list[tuple[HostedKind, list[HostedTool]]]:
        """The request's hosted tools by kind, in the table's order.

        Raises:
            InvalidRequestError: the request has a hosted tool this server does not offer.
        """
        for tool in request.tools:
            if not isinstance(tool, FunctionTool) and type(tool) not in self._kinds:
                raise InvalidRequestError(f"this server does not offer the {tool.type} tool", "tools")
        grouped = [(kind, [tool for tool in request.tools if type(tool) is cls]) for cls, kind in self._kinds.items()]
        return [(kind, tools) for kind, tools in grouped if tools]

    def validate(self, request: CreateResponseRequest) -> None:
        """Check the request's hosted tools can be offered, and no function tool takes a hosted tool's name.

        Raises:
            InvalidRequestError: what is wrong.
        """
        for kind, tools in self._grouped(request):
            kind.validate(tools)
            for name in kind.names:
                if any(isinstance(tool, FunctionTool) and tool.name == name for tool in request.tools):
                    raise InvalidRequestError(f"a function tool cannot be named '{name}' beside that tool", "tools")

    def wants_prior(self, request: CreateResponseRequest) -> bool:
        """Whether binding reads the items of the conversation or chain (a listing may be reused)."""
        return any(kind.uses_prior for kind, _ in self._grouped(request))

    async def check(self, request: CreateResponseRequest) -> None:
        """Check what the hosted tools name exists and the caller may use it (each kind raises its typed error)."""
        for kind, tools in self._grouped(request):
            await kind.check(tools)

    async def bind(
        self,
        request: CreateResponseRequest,
        session_id: str,
        prior: list[Item],
        chain_session: Callable[[], Awaitable[str]],
    ) -> Binding:
        """The server tools, renderers and announcements of the request's hosted tools (see :class:`BindContext`)."""
        taken = {tool.name for tool in request.tools if isinstance(tool, FunctionTool)}
        include = frozenset(request.include or [])
        binding = Binding()
        for kind, tools in self._grouped(request):
            context = BindContext(session_id, include, frozenset(taken), prior, chain_session)
            bound = await kind.bind(tools, context)
            taken.update(bound.server_tools)
            binding.merge(bound)
        return binding
