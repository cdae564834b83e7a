"""Inference settings carried by agents and turns: sampling, tool config, output format."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .limits import MAX_MESSAGES, MAX_TOOLS, AtMost, RequiredId


class GreedySamplingStrategy(BaseModel):
    """Always pick the most likely token."""

    type: Literal["greedy"] = "greedy"


class TopPSamplingStrategy(BaseModel):
    """Nucleus sampling."""

    type: Literal["top_p"] = "top_p"
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=0.95, gt=0, le=1)


class TopKSamplingStrategy(BaseModel):
    """Sample among the k most likely tokens."""

    type: Literal["top_k"] = "top_k"
    top_k: int = Field(ge=1)


SamplingStrategy = Annotated[
    GreedySamplingStrategy | TopPSamplingStrategy | TopKSamplingStrategy,
    Field(discriminator="type"),
]


class SamplingParams(BaseModel):
    """How the model samples its output."""

    strategy: SamplingStrategy = Field(default_factory=GreedySamplingStrategy)
    max_tokens: int | None = Field(default=0, ge=0)
    repetition_penalty: float | None = 1.0
    stop: list[str] | None = None


ToolChoice = str  # "auto" | "required" | "none" | a tool name
ToolPromptFormat = Literal["json", "function_tag", "python_list"]


class ToolConfig(BaseModel):
    """How the model is offered tools."""

    tool_choice: ToolChoice | None = "auto"
    tool_prompt_format: ToolPromptFormat | None = None
    system_message_behavior: Literal["append", "replace"] | None = "append"


class JsonSchemaResponseFormat(BaseModel):
    """Constrain the output to a JSON schema."""

    type: Literal["json_schema"] = "json_schema"
    json_schema: dict[str, Any]
    name: str | None = None
    """A name for the schema (a ferryman addition, passed to OpenAI-compatible servers)."""
    strict: bool | None = None
    """Whether the server must follow the schema strictly (a ferryman addition)."""


class GrammarResponseFormat(BaseModel):
    """Constrain the output to a grammar."""

    type: Literal["grammar"] = "grammar"
    bnf: dict[str, Any]


ResponseFormat = Annotated[JsonSchemaResponseFormat | GrammarResponseFormat, Field(discriminator="type")]


class OpenAIRequest(BaseModel):
    """Body of ``/chat/completions`` and ``/embeddings``: OpenAI's request, passed on as it is.

    Only ``model`` is read here (to route the request); every other field goes to the provider, a chat
    completion's ``messages`` and ``tools`` counted first.
    """

    model_config = ConfigDict(extra="allow", protected_namespaces=())

    model: RequiredId
    messages: Annotated[list[dict[str, Any]], AtMost(MAX_MESSAGES)] | None = None
    tools: Annotated[list[dict[str, Any]], AtMost(MAX_TOOLS)] | None = None


class OpenAIObject(BaseModel):
    """An OpenAI answer (a completion, a chunk, embeddings) as the provider produced it."""

    model_config = ConfigDict(extra="allow")
