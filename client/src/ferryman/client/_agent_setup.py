"""What :class:`Agent` and :class:`AsyncAgent` share: the configuration, its tools, and each turn's flow.

Nothing here does I/O: it builds the agent's configuration (Agents API) or
the fields every response repeats (Responses API), names the calls that open
sessions, and makes the :class:`~ferryman.client._agent_flow.TurnFlow` of a turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

from ferryman.api.agents import AgentConfig, Document, MultitaskStrategy, ToolGroupWithArgs
from ferryman.api.approvals import ApprovalDecision, ApprovalRequest, RequireApproval
from ferryman.api.content import URL, ToolCall, ToolResponse, TurnInputMessage, UserMessage, content_to_text
from ferryman.api.inference import JsonSchemaResponseFormat

from ._agent_flow import AgentsFlow, ClientCall, TurnFlow
from ._responses_flow import ResponsesFlow
from .tools import ClientTool, error_response

Api = Literal["agents", "responses"]
ToolSpec = ClientTool | Callable[..., Any] | str | ToolGroupWithArgs | Mapping[str, Any]
"""A tool of an agent: a client tool (or a plain function, made one), a toolgroup reference, or a Responses tool."""
ApprovalCallback = Callable[[ApprovalRequest], bool | Awaitable[bool]]
"""Asked for each server tool call that waits for approval: True runs it, False refuses it."""
MessagesInput = str | Sequence[TurnInputMessage | Mapping[str, Any]]
"""A turn's input: a user message's text, or messages."""

NO_CALLBACK = "refused: the agent has no on_approval callback"
DENIED = "refused by the caller"

_MESSAGES: TypeAdapter[list[TurnInputMessage]] = TypeAdapter(list[TurnInputMessage])
_DOCUMENTS: TypeAdapter[list[Document]] = TypeAdapter(list[Document])
# The toolgroups that have a Responses API form, and how their arguments map onto it.
_HOSTED: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "builtin::websearch": lambda args: {"type": "web_search"},
    "builtin::code_interpreter": lambda args: {"type": "code_interpreter", "container": "auto"},
    "builtin::rag": lambda args: {"type": "file_search", "vector_store_ids": list(args.get("vector_db_ids", []))},
    "builtin::file_search": lambda args: {
        "type": "file_search",
        "vector_store_ids": list(args.get("vector_store_ids", args.get("vector_db_ids", []))),
    },
}
_RESPONSES_OPTIONS = {"response_format", "require_approval", "name", "tool_choice"}


class AgentSetup:
    """An agent's definition, and the flows of its turns on the API it runs on."""

    def __init__(
        self,
        model: str,
        instructions: str,
        tools: Sequence[ToolSpec],
        api: Api,
        on_approval: ApprovalCallback | None,
        agent_config: dict[str, Any],
        response_options: Mapping[str, Any] | None = None,
    ) -> None:
        """Check and sort the agent's tools and options (see :class:`~ferryman.client.Agent`).

        Raises:
            ValueError: An option or tool has no form on the chosen API.
        """
        if api not in ("agents", "responses"):
            raise ValueError(f"api must be 'agents' or 'responses', not {api!r}")
        self.api, self.model, self.instructions, self.on_approval = api, model, instructions, on_approval
        self.client_tools: dict[str, ClientTool] = {}
        self.toolgroups: list[str | ToolGroupWithArgs | dict[str, Any]] = []
        for tool in tools:
            if isinstance(tool, ClientTool) or (callable(tool) and not isinstance(tool, str | Mapping)):
                made = tool if isinstance(tool, ClientTool) else ClientTool(tool)
                self.client_tools[made.name] = made
            else:
                self.toolgroups.append(dict(tool) if isinstance(tool, Mapping) else tool)
        self.agent_config = agent_config
        self.response_options = dict(response_options or {})
        self.declared_tools: frozenset[str] = frozenset()
        """Client tools the stored agent declares beyond these (an attached agent's): their calls are answered."""
        if api == "responses":
            unknown = set(agent_config) - _RESPONSES_OPTIONS
            if unknown:
                raise ValueError(f"no Responses API form for {sorted(unknown)}: use response_options=")
            self.hosted_tools = [self._hosted(ref) for ref in self.toolgroups]
        elif response_options:
            raise ValueError("response_options apply to api='responses' only")

    @classmethod
    def attached(
        cls, config: AgentConfig, tools: Sequence[ClientTool | Callable[..., Any]], on_approval: ApprovalCallback | None
    ) -> AgentSetup:
        """The setup of an agent already stored with ``config``, running ``tools`` (some of its client tools).

        Raises:
            ValueError: A tool is not a client tool the stored agent declares.
        """
        if any(isinstance(tool, str | Mapping) for tool in tools):
            raise ValueError("an attached agent's toolgroups are stored on the server: pass client tools only")
        setup = cls(config.model, config.instructions, tools, "agents", on_approval, {})
        declared = frozenset(tool.name for tool in config.client_tools or [])
        unknown = set(setup.client_tools) - declared
        if unknown:
            raise ValueError(f"the agent declares no client tool named {sorted(unknown)}")
        setup.declared_tools = declared
        return setup

    def config(self) -> AgentConfig:
        """The configuration stored on the server (Agents API)."""
        return AgentConfig(
            model=self.model,
            instructions=self.instructions,
            toolgroups=self.toolgroups,
            client_tools=[tool.tool_def() for tool in self.client_tools.values()],
            **self.agent_config,
        )

    def session_call(self, agent_id: str | None, name: str) -> ClientCall:
        """The call that opens a session (a conversation on the Responses API)."""
        if self.api == "agents":
            return ClientCall(("agents", "sessions", "create"), {"agent_id": agent_id, "session_name": name})
        return ClientCall(("conversations", "create"), {"metadata": {"name": name}})

    def session_id(self, created: Any) -> str:
        """The id in what :meth:`session_call` answered."""
        return str(created.session_id if self.api == "agents" else created.id)

    def flow(
        self,
        agent_id: str | None,
        session_id: str,
        messages: MessagesInput,
        documents: Sequence[Document | Mapping[str, Any]] | None,
        stream: bool,
        multitask_strategy: MultitaskStrategy | None = None,
        webhook: str | None = None,
    ) -> TurnFlow:
        """The flow of one turn (``multitask_strategy``: what it does while another runs in the session;
        ``webhook``: where the server posts the end of each of its runs)."""
        typed = _MESSAGES.validate_python([UserMessage(content=messages)] if isinstance(messages, str) else messages)
        docs = _DOCUMENTS.validate_python(documents) if documents else None
        if self.api == "agents":
            assert agent_id is not None
            client_tools = frozenset(self.client_tools) | self.declared_tools
            return AgentsFlow(agent_id, session_id, typed, docs, stream, client_tools, multitask_strategy, webhook)
        request, items = self._response_request(), _input_items(typed, docs)
        return ResponsesFlow(session_id, request, items, stream, multitask_strategy, webhook)

    def tool_for(self, call: ToolCall) -> ClientTool | None:
        """The client tool a call names."""
        return self.client_tools.get(call.tool_name)

    def unknown_tool(self, call: ToolCall) -> ToolResponse:
        """What the model is told when it calls a client tool this agent does not have."""
        return error_response(call, f"no client tool named {call.tool_name!r}")

    def decision(self, request: ApprovalRequest, approved: bool | None) -> ApprovalDecision:
        """The decision on one request: ``approved`` None means no callback (refused)."""
        reason = None if approved else (NO_CALLBACK if approved is None else DENIED)
        return ApprovalDecision(call_id=request.call_id, approve=bool(approved), reason=reason)

    def _response_request(self) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "instructions": self.instructions or None}
        request["tools"] = [t.function_tool().model_dump(exclude_none=True) for t in self.client_tools.values()]
        request["tools"] += self.hosted_tools
        if "tool_choice" in self.agent_config:
            request["tool_choice"] = self.agent_config["tool_choice"]
        response_format = self.agent_config.get("response_format")
        if response_format is not None:
            form = JsonSchemaResponseFormat.model_validate(response_format)
            schema = {"type": "json_schema", "name": form.name or "output", "schema": form.json_schema}
            request["text"] = {"format": {**schema, "strict": form.strict} if form.strict is not None else schema}
        return {**request, **self.response_options}

    def _hosted(self, ref: str | ToolGroupWithArgs | dict[str, Any]) -> dict[str, Any]:
        if isinstance(ref, dict) and "type" in ref:
            return ref  # a Responses tool, as the caller wrote it
        raw = {"name": ref} if isinstance(ref, str) else ref
        group = ref if isinstance(ref, ToolGroupWithArgs) else ToolGroupWithArgs.model_validate(raw)
        name = group.name.split("/", 1)[0]
        if name not in _HOSTED:
            raise ValueError(f"toolgroup {group.name!r} has no Responses API form: pass a Responses tool dict")
        tool = _HOSTED[name](group.args)
        policy: RequireApproval | dict[str, Any] | None = group.require_approval or self.agent_config.get(
            "require_approval"
        )
        if policy is not None:
            tool["require_approval"] = policy.model_dump(exclude_none=True) if isinstance(policy, BaseModel) else policy
        return tool


def _input_items(messages: list[TurnInputMessage], documents: list[Document] | None) -> list[dict[str, Any]]:
    """A turn's input as Responses items: the user's messages, each document's text after the last one."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, UserMessage):
            raise ValueError("api='responses' takes user messages only (tool results are sent by the agent)")
        items.append({"type": "message", "role": "user", "content": content_to_text(message.content)})
    for document in documents or []:
        if isinstance(document.content, URL):
            raise ValueError("api='responses' takes documents with inline content, not URLs")
        text = content_to_text(document.content)
        items.append({"type": "message", "role": "user", "content": f"Document ({document.mime_type}):\n{text}"})
    return items
