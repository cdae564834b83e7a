"""OpenAI Responses and Conversations API models: requests, items, responses and stream events."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, PrivateAttr, Tag

from .agents import MultitaskStrategy
from .approvals import RequireApproval
from .content import Message
from .limits import (
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES,
    MAX_SHIELDS,
    MAX_TOOLS,
    AtMost,
    Id,
    Instructions,
    MessageText,
    Metadata,
    Name,
    RequiredId,
    TextAtMost,
)
from .webhooks import WebhookUrl


class InputText(BaseModel):
    """Text given to the model."""

    type: Literal["input_text"] = "input_text"
    text: MessageText


class InputImage(BaseModel):
    """An image given to the model, by URL (or data URL)."""

    type: Literal["input_image"] = "input_image"
    image_url: str | None = None
    detail: str | None = "auto"


class OutputText(BaseModel):
    """Text produced by the model."""

    type: Literal["output_text"] = "output_text"
    text: MessageText
    annotations: list[dict[str, Any]] = Field(default_factory=list)
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class Refusal(BaseModel):
    """The answer of a response a guardrail blocked, in place of the model's text."""

    type: Literal["refusal"] = "refusal"
    refusal: MessageText


ContentPart = Annotated[InputText | InputImage | OutputText | Refusal, Field(discriminator="type")]


class MessageItem(BaseModel):
    """A message in a conversation or response."""

    type: Literal["message"] = "message"
    id: Id | None = None
    role: Literal["user", "assistant", "system", "developer"]
    content: Annotated[MessageText | list[ContentPart], TextAtMost(MAX_MESSAGE_CHARS)]
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class FunctionCallItem(BaseModel):
    """The model's call of a client-side function."""

    type: Literal["function_call"] = "function_call"
    id: Id | None = None
    call_id: Id
    name: Name
    arguments: MessageText
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class FunctionCallOutputItem(BaseModel):
    """The client's result of a function call."""

    type: Literal["function_call_output"] = "function_call_output"
    id: Id | None = None
    call_id: Id
    output: MessageText
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class FileSearchResult(BaseModel):
    """One passage a file search found."""

    file_id: str
    filename: str
    score: float
    text: str
    attributes: dict[str, Any] = Field(default_factory=dict)


class FileSearchCallItem(BaseModel):
    """A search the server ran with the ``file_search`` tool; ``results`` shown only to a request including them."""

    type: Literal["file_search_call"] = "file_search_call"
    id: Id | None = None
    status: Literal["in_progress", "searching", "completed", "incomplete", "failed"] = "completed"
    queries: list[str] = Field(default_factory=list)
    results: list[FileSearchResult] | None = None


class McpListedTool(BaseModel):
    """One tool an MCP server lists."""

    name: str
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    description: str | None = None
    annotations: dict[str, Any] | None = None


class McpListToolsItem(BaseModel):
    """The tools an MCP server offered; kept so that later responses of the conversation need not list them again."""

    type: Literal["mcp_list_tools"] = "mcp_list_tools"
    id: Id | None = None
    server_label: str
    tools: list[McpListedTool] = Field(default_factory=list)
    error: str | None = None


class McpCallItem(BaseModel):
    """A call the server made to an MCP server's tool; ``error`` holds why it failed."""

    type: Literal["mcp_call"] = "mcp_call"
    id: Id | None = None
    server_label: str
    name: str
    arguments: str
    output: str | None = None
    error: dict[str, Any] | None = None
    approval_request_id: Id | None = None
    status: Literal["in_progress", "calling", "completed", "incomplete", "failed"] | None = None


class CodeInterpreterLogs(BaseModel):
    """Text the code printed."""

    type: Literal["logs"] = "logs"
    logs: str


class CodeInterpreterImage(BaseModel):
    """An image the code produced."""

    type: Literal["image"] = "image"
    url: str


CodeInterpreterOutput = Annotated[CodeInterpreterLogs | CodeInterpreterImage, Field(discriminator="type")]


class CodeInterpreterCallItem(BaseModel):
    """Code the server ran with the ``code_interpreter`` tool, and what it printed and drew."""

    type: Literal["code_interpreter_call"] = "code_interpreter_call"
    id: Id | None = None
    code: str | None = None
    container_id: str
    outputs: list[CodeInterpreterOutput] | None = None
    status: Literal["in_progress", "interpreting", "completed", "incomplete", "failed"] = "completed"


class WebSearchAction(BaseModel):
    """What a web search call did: a search for ``query``."""

    type: Literal["search"] = "search"
    query: str | None = None
    sources: list[dict[str, Any]] | None = None


class WebSearchCallItem(BaseModel):
    """A search of the web the server ran with the ``web_search`` tool."""

    type: Literal["web_search_call"] = "web_search_call"
    id: Id | None = None
    status: Literal["in_progress", "searching", "completed", "incomplete", "failed"] = "completed"
    action: WebSearchAction = Field(default_factory=WebSearchAction)


class McpApprovalRequestItem(BaseModel):
    """A hosted tool call held back until the client approves it (``server_label`` is "ferryman" for non-MCP tools)."""

    type: Literal["mcp_approval_request"] = "mcp_approval_request"
    id: Id | None = None
    server_label: str
    name: str
    arguments: str


class McpApprovalResponseItem(BaseModel):
    """The client's decision on an ``mcp_approval_request`` of an earlier response."""

    type: Literal["mcp_approval_response"] = "mcp_approval_response"
    id: Id | None = None
    approval_request_id: Id
    approve: bool
    reason: MessageText | None = None


class CompactionItem(BaseModel):
    """A conversation compacted, sealed by the server: by ``POST /v1/responses/compact`` (its summary), or by a
    response whose input crossed its ``compact_threshold`` (an item of its output: all the model read then).

    Given back in a later input, it stands in for the items it summarized; a response's item stands in for
    every item before it. ``encrypted_content`` is opaque: only the server that made it (with the same
    ``context.secret``) can read it.
    """

    type: Literal["compaction"] = "compaction"
    id: Id | None = None
    encrypted_content: Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)]
    created_by: str | None = None
    _summary: str | None = PrivateAttr(default=None)
    _history: list[Message] | None = PrivateAttr(default=None)
    _unread: tuple[str | None, str] | None = PrivateAttr(default=None)

    @property
    def summary(self) -> str | None:
        """The summary, once the server opened the item of a ``compact`` call (never serialized)."""
        return self._summary

    @property
    def history(self) -> list[Message] | None:
        """What the model read once a response compacted, which replaces all before the item; None until the
        server opened a response's item (never serialized)."""
        return self._history

    @property
    def unread(self) -> tuple[str | None, str] | None:
        """Once the server opened the item of a response in a conversation: the ids of the last item of the
        conversation the response read (None: it read none) and of the first item it added; the items between
        them came in while it ran, unseen by ``history`` (never serialized)."""
        return self._unread

    def opened(
        self,
        summary: str | None = None,
        history: list[Message] | None = None,
        unread: tuple[str | None, str] | None = None,
    ) -> CompactionItem:
        """A copy that holds what ``encrypted_content`` sealed: a ``summary``, or a response's ``history`` (and
        its ``unread`` bounds)."""
        copy = self.model_copy()
        copy._summary, copy._history, copy._unread = summary, history, unread
        return copy


HostedCallItem = FileSearchCallItem | McpCallItem | CodeInterpreterCallItem | WebSearchCallItem
"""An item of a call the server ran itself (a hosted tool's call)."""

Item = Annotated[
    MessageItem
    | FunctionCallItem
    | FunctionCallOutputItem
    | FileSearchCallItem
    | McpListToolsItem
    | McpCallItem
    | CodeInterpreterCallItem
    | WebSearchCallItem
    | McpApprovalRequestItem
    | McpApprovalResponseItem
    | CompactionItem,
    Field(discriminator="type"),
]


def _typed_items(value: Any) -> Any:
    """Items written in the short form ``{"role": …, "content": …}`` are messages."""
    if isinstance(value, list):
        return [
            {**v, "type": "message"} if isinstance(v, dict) and "type" not in v and "role" in v else v for v in value
        ]
    return value


ItemsInput = Annotated[list[Item], BeforeValidator(_typed_items), AtMost(MAX_MESSAGES)]
"""A list of items as clients write them: the short message form is accepted."""


class FunctionTool(BaseModel):
    """A client-side function the model may call."""

    type: Literal["function"] = "function"
    name: Name
    description: MessageText | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FileSearchRanking(BaseModel):
    """``ranking_options`` of a ``file_search`` tool; Llama Stack's rankers add fields of their own."""

    model_config = ConfigDict(extra="allow")

    ranker: str | None = None
    score_threshold: float | None = Field(default=None, ge=0, le=1)


class FileSearchTool(BaseModel):
    """The server-side search of vector stores, offered to the model as the ``file_search`` tool."""

    type: Literal["file_search"] = "file_search"
    vector_store_ids: list[Id] = Field(min_length=1)
    filters: dict[str, Any] | None = None
    max_num_results: int | None = Field(default=None, ge=1, le=50)
    ranking_options: FileSearchRanking | None = None
    require_approval: RequireApproval | None = None
    """Whether searches wait for the client's approval (a ferryman extension, as on the ``mcp`` tool)."""


class McpToolFilter(BaseModel):
    """``allowed_tools`` as a filter: tools by name, or only those the server marks read-only."""

    tool_names: list[str] | None = None
    read_only: bool | None = None


class McpTool(BaseModel):
    """A remote MCP server whose tools the model may call.

    ``headers`` and ``authorization`` are credentials: used for this request's
    calls only, never stored, logged or echoed (see :meth:`without_credentials`).
    """

    type: Literal["mcp"]
    server_label: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    server_url: str = Field(min_length=1)
    server_description: str | None = None
    headers: dict[str, str] | None = Field(default=None, repr=False)
    authorization: str | None = Field(default=None, repr=False)
    allowed_tools: list[str] | McpToolFilter | None = None
    require_approval: RequireApproval | None = None

    def without_credentials(self) -> McpTool:
        """The tool as it may be stored and echoed."""
        return self.model_copy(update={"headers": None, "authorization": None})


class CodeInterpreterContainer(BaseModel):
    """A container the server picks (``auto``)."""

    type: Literal["auto"]
    file_ids: list[str] | None = None


class CodeInterpreterTool(BaseModel):
    """Python the model writes, run by the server in a sandbox."""

    type: Literal["code_interpreter"]
    container: str | CodeInterpreterContainer
    require_approval: RequireApproval | None = None
    """Whether runs wait for the client's approval (a ferryman extension, as on the ``mcp`` tool)."""


class WebSearchTool(BaseModel):
    """A search of the web the model may run."""

    model_config = ConfigDict(extra="allow")

    type: Literal["web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11"]
    search_context_size: Literal["low", "medium", "high"] | None = None
    user_location: dict[str, Any] | None = None
    filters: dict[str, Any] | None = None
    require_approval: RequireApproval | None = None
    """Whether searches wait for the client's approval (a ferryman extension, as on the ``mcp`` tool)."""


def _tool_kind(value: Any) -> str:
    """The tag of a response tool: its ``type`` (``function`` when omitted), every web search version as one."""
    kind = value.get("type", "function") if isinstance(value, dict) else getattr(value, "type", "function")
    return "web_search" if isinstance(kind, str) and kind.startswith("web_search") else str(kind)


ResponseTool = Annotated[
    Annotated[FunctionTool, Tag("function")]
    | Annotated[FileSearchTool, Tag("file_search")]
    | Annotated[McpTool, Tag("mcp")]
    | Annotated[CodeInterpreterTool, Tag("code_interpreter")]
    | Annotated[WebSearchTool, Tag("web_search")],
    Discriminator(_tool_kind),
]
"""A tool of a response, told apart by its ``type`` (a function tool may omit it)."""

HostedTool = FileSearchTool | McpTool | CodeInterpreterTool | WebSearchTool
"""A tool the server runs itself."""

FILE_SEARCH_RESULTS = "file_search_call.results"
"""The ``include`` value that shows a file search's results in its item (they are always kept)."""


class TextFormat(BaseModel):
    """The output format: plain text, any JSON object, or a JSON schema."""

    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    description: str | None = None
    strict: bool | None = None

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class TextConfig(BaseModel):
    """The ``text`` parameter."""

    format: TextFormat = Field(default_factory=TextFormat)


class ConversationRef(BaseModel):
    """A conversation named by id."""

    id: Id


class GuardrailSpec(BaseModel):
    """A guardrail named by an object (Llama Stack's ``ResponseGuardrailSpec``): ``type`` is the shield's id."""

    type: RequiredId


class ContextManagementEntry(BaseModel):
    """One way a response keeps its prompt within the model's context: compaction, the one there is."""

    type: Literal["compaction"]
    compact_threshold: int | None = Field(default=None, ge=1, le=10_000_000)


class CompactRequest(BaseModel):
    """Body of ``POST /v1/responses/compact``: a conversation, by its items, its previous response, or both."""

    model_config = ConfigDict(extra="allow")

    model: RequiredId
    input: MessageText | ItemsInput | None = None
    instructions: Instructions | None = None
    previous_response_id: Id | None = None


class CompactedResponse(BaseModel):
    """The answer of ``POST /v1/responses/compact``: the user messages, then one ``compaction`` item."""

    id: str
    object: Literal["response.compaction"] = "response.compaction"
    created_at: int
    output: list[Item]
    usage: Usage


class CreateResponseRequest(BaseModel):
    """Body of ``POST /v1/responses``."""

    model_config = ConfigDict(extra="allow")

    model: RequiredId
    input: MessageText | ItemsInput = ""
    instructions: Instructions | None = None
    tools: Annotated[list[ResponseTool], AtMost(MAX_TOOLS)] = Field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = "auto"
    include: list[str] | None = None
    parallel_tool_calls: bool | None = True
    max_tool_calls: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    text: TextConfig | None = None
    metadata: Metadata | None = None
    store: bool | None = True
    previous_response_id: Id | None = None
    conversation: Id | ConversationRef | None = None
    stream: bool | None = False
    background: bool | None = False
    guardrails: Annotated[list[Id | GuardrailSpec], AtMost(MAX_SHIELDS)] | None = None
    """Llama Stack's guardrails: shields that check the input before the model and the answer before the client."""
    truncation: Literal["disabled", "auto"] | None = None
    """``auto``: the oldest items are left out of the prompt until it fits the model's context; ``disabled``
    (the default): a prompt that does not fit is refused (400, ``context_length_exceeded``)."""
    context_management: Annotated[list[ContextManagementEntry], AtMost(1)] | None = None
    """``[{"type": "compaction", "compact_threshold": N}]``: past N prompt tokens, a summary made by the model
    stands in for the oldest items (the rest of the chain reads it too)."""
    webhook: WebhookUrl | None = None
    """Where the server posts ``response.completed``, ``response.failed`` or ``response.cancelled`` when the
    response ends (a ferryman extension; Standard Webhooks signatures)."""
    multitask_strategy: MultitaskStrategy = "reject"
    """What the response does while another response runs in its ``conversation`` (a ferryman extension):
    ``reject`` (409), ``enqueue`` (``queued`` until those before it ended), ``interrupt`` the running one
    (cancelled), or ``rollback`` (cancelled and deleted). Outside a conversation nothing else runs: it is unused."""

    def conversation_id(self) -> str | None:
        """The conversation's id, whichever form named it."""
        if isinstance(self.conversation, ConversationRef):
            return self.conversation.id
        return self.conversation


ResponseStatus = Literal["queued", "in_progress", "completed", "incomplete", "failed", "cancelled"]


class Usage(BaseModel):
    """Tokens used by a response."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    input_tokens_details: dict[str, int] = Field(default_factory=lambda: {"cached_tokens": 0})
    output_tokens_details: dict[str, int] = Field(default_factory=lambda: {"reasoning_tokens": 0})


class ResponseError(BaseModel):
    """Why a response failed."""

    code: str
    message: str


class Response(BaseModel):
    """A response object."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: ResponseStatus
    model: str
    output: list[Item] = Field(default_factory=list)
    instructions: str | None = None
    tools: list[ResponseTool] = Field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = "auto"
    parallel_tool_calls: bool = True
    max_tool_calls: int | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    text: TextConfig = Field(default_factory=TextConfig)
    metadata: dict[str, str] = Field(default_factory=dict)
    previous_response_id: str | None = None
    conversation: ConversationRef | None = None
    background: bool = False
    store: bool = True
    truncation: Literal["disabled", "auto"] = "disabled"
    usage: Usage | None = None
    error: ResponseError | None = None
    incomplete_details: dict[str, str] | None = None
    reasoning: dict[str, Any] | None = None
    user: str | None = None


class ListedResponse(Response):
    """A response as ``GET /v1/responses`` lists it: with its input items, which Llama Stack's listing requires."""

    input: list[Item] = Field(default_factory=list)


class ItemList(BaseModel):
    """A page of items."""

    object: Literal["list"] = "list"
    data: list[Item]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class ResponseList(BaseModel):
    """A page of responses."""

    object: Literal["list"] = "list"
    data: list[ListedResponse]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class CreateConversationRequest(BaseModel):
    """Body of ``POST /v1/conversations``."""

    items: ItemsInput = Field(default_factory=list)
    metadata: Metadata | None = None


class UpdateConversationRequest(BaseModel):
    """Body of ``POST /v1/conversations/{id}``."""

    metadata: Metadata


class ForkConversationRequest(BaseModel):
    """Body of ``POST /v1/conversations/{id}/fork`` (a ferryman extension)."""

    item_id: RequiredId
    """The last item the fork keeps: its items are the conversation's up to and including this one."""
    metadata: Metadata | None = None
    """The fork's metadata (default: the original's)."""


class AddItemsRequest(BaseModel):
    """Body of ``POST /v1/conversations/{id}/items``."""

    items: ItemsInput = Field(min_length=1)


class Conversation(BaseModel):
    """A conversation object."""

    id: str
    object: Literal["conversation"] = "conversation"
    created_at: int
    metadata: dict[str, str] = Field(default_factory=dict)


class ConversationList(BaseModel):
    """A page of conversations (``GET /v1/conversations``, ferryman's own: OpenAI lists none)."""

    object: Literal["list"] = "list"
    data: list[Conversation]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class DeletedObject(BaseModel):
    """Answer to a delete."""

    id: str
    object: str
    deleted: bool = True
