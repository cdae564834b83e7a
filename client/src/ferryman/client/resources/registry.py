"""What the server offers: models, toolgroups and tools, vector DBs, embeddings, shields, safety and moderations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ferryman.api.registry import Model, Tool, ToolGroup, ToolInvocationResult
from ferryman.api.safety import ModerationResponse, RunShieldResponse, ShieldResource
from ferryman.api.vector_io import VectorDB

from .._parsing import M, body, data_of, model, nothing, raw_json
from .._transport import Call, RequestPlan, path
from ._base import AsyncResource, SyncResource, route_call

T = TypeVar("T", bound=BaseModel)


def _listed(route: str, item: type[M], params: Mapping[str, Any] | None = None) -> Call[list[M]]:
    return Call(RequestPlan("GET", route, params=params), data_of(item))


def _keyed(route: str, parsed: type[M], fields: Mapping[str, Any]) -> Call[M]:
    """A POST that creates or runs something: sent with an Idempotency-Key, the same on every retry."""
    return Call(RequestPlan("POST", route, json=body(**fields), idempotent=True), model(parsed))


def _remove(template: str, *ids: str) -> Call[None]:
    return Call(RequestPlan("DELETE", path(template, *ids)), nothing)


def _post(route: str, parsed: type[M], fields: Mapping[str, Any]) -> Call[M]:
    return Call(RequestPlan("POST", route, json=body(**fields)), model(parsed))


class _Registry(Generic[M]):
    """The calls of one registry route family (``/v1/models``, ``/v1/toolgroups``…)."""

    def __init__(self, route: str, item: type[M]) -> None:
        self.route, self.item = route, item

    def list(self) -> Call[list[M]]:
        return _listed(self.route, self.item)

    def retrieve(self, identifier: str) -> Call[M]:
        return route_call("GET", self.route + "/{}", self.item, identifier)

    def register(self, fields: Mapping[str, Any]) -> Call[M]:
        return _keyed(self.route, self.item, fields)

    def unregister(self, identifier: str) -> Call[None]:
        return _remove(self.route + "/{}", identifier)


_MODELS = _Registry("/v1/models", Model)
_TOOLGROUPS = _Registry("/v1/toolgroups", ToolGroup)
_VECTOR_DBS = _Registry("/v1/vector-dbs", VectorDB)
_SHIELDS = _Registry("/v1/shields", ShieldResource)


class _SyncRegistry(SyncResource, Generic[T]):
    _calls: _Registry[T]

    def list(self) -> list[T]:
        """Every registered one."""
        return self._transport.call(self._calls.list())

    def retrieve(self, identifier: str) -> T:
        """One, by its id."""
        return self._transport.call(self._calls.retrieve(identifier))

    def unregister(self, identifier: str) -> None:
        """Remove one."""
        self._transport.call(self._calls.unregister(identifier))


class _AsyncRegistry(AsyncResource, Generic[T]):
    _calls: _Registry[T]

    async def list(self) -> list[T]:
        """Every registered one."""
        return await self._transport.call(self._calls.list())

    async def retrieve(self, identifier: str) -> T:
        """One, by its id."""
        return await self._transport.call(self._calls.retrieve(identifier))

    async def unregister(self, identifier: str) -> None:
        """Remove one."""
        await self._transport.call(self._calls.unregister(identifier))


class Models(_SyncRegistry[Model]):
    """``client.models``: ``list()``, ``retrieve(model_id)``, ``register(...)``, ``unregister(model_id)``."""

    _calls = _MODELS

    def register(self, *, model_id: str, provider_id: str | None = None, provider_model_id: str | None = None,
                 model_type: str = "llm", metadata: Mapping[str, Any] | None = None) -> Model:  # fmt: skip
        """Register a model with a provider."""
        return self._transport.call(self._calls.register(dict(
            model_id=model_id, provider_id=provider_id, provider_model_id=provider_model_id, model_type=model_type,
            metadata=metadata)))  # fmt: skip


class Toolgroups(_SyncRegistry[ToolGroup]):
    """``client.toolgroups``: ``list()``, ``retrieve(id)``, ``register(...)``, ``unregister(id)``."""

    _calls = _TOOLGROUPS

    def register(self, *, toolgroup_id: str, provider_id: str, mcp_endpoint: Mapping[str, str] | None = None,
                 args: Mapping[str, Any] | None = None) -> ToolGroup:  # fmt: skip
        """Register a toolgroup (an MCP server's, with ``mcp_endpoint={"uri": ...}``)."""
        fields = dict(toolgroup_id=toolgroup_id, provider_id=provider_id, mcp_endpoint=mcp_endpoint, args=args)
        return self._transport.call(self._calls.register(fields))


class VectorDbs(_SyncRegistry[VectorDB]):
    """``client.vector_dbs`` (Llama Stack's names for vector stores)."""

    _calls = _VECTOR_DBS

    def register(self, *, vector_db_id: str, embedding_model: str, **options: Any) -> VectorDB:
        """Register a vector DB (``embedding_dimension``, ``provider_id``, ``provider_vector_db_id``)."""
        fields = dict(vector_db_id=vector_db_id, embedding_model=embedding_model, **options)
        return self._transport.call(self._calls.register(fields))


class Shields(_SyncRegistry[ShieldResource]):
    """``client.shields``."""

    _calls = _SHIELDS

    def register(self, *, shield_id: str, provider_id: str | None = None, provider_shield_id: str | None = None,
                 params: Mapping[str, Any] | None = None) -> ShieldResource:  # fmt: skip
        """Register a shield."""
        fields = dict(shield_id=shield_id, provider_id=provider_id, provider_shield_id=provider_shield_id,
                      params=params)  # fmt: skip
        return self._transport.call(self._calls.register(fields))


def _tools(toolgroup_id: str | None) -> Call[list[Tool]]:
    return _listed("/v1/tools", Tool, {"toolgroup_id": toolgroup_id})


def _invoke(tool_name: str, kwargs: Mapping[str, Any]) -> Call[ToolInvocationResult]:
    # A tool may act on the world: a retry must get the first run's answer, not run it again.
    return _keyed("/v1/tool-runtime/invoke", ToolInvocationResult, {"tool_name": tool_name, "kwargs": dict(kwargs)})


class Tools(SyncResource):
    """``client.tools``."""

    def list(self, *, toolgroup_id: str | None = None) -> list[Tool]:
        """The server's tools (of one group if given)."""
        return self._transport.call(_tools(toolgroup_id))

    def retrieve(self, tool_name: str) -> Tool:
        """One tool."""
        return self._transport.call(route_call("GET", "/v1/tools/{}", Tool, tool_name))

    def invoke(self, tool_name: str, **kwargs: Any) -> ToolInvocationResult:
        """Run a server-side tool with the given arguments."""
        return self._transport.call(_invoke(tool_name, kwargs))


def _run_shield(shield_id: str, messages: Sequence[Any], params: Mapping[str, Any] | None) -> Call[RunShieldResponse]:
    return _post("/v1/safety/run-shield", RunShieldResponse, {"shield_id": shield_id, "messages": messages,
                                                              "params": params})  # fmt: skip


def _moderate(input: str | Sequence[str], model_id: str | None) -> Call[ModerationResponse]:
    return _post("/v1/moderations", ModerationResponse, {"input": input, "model": model_id})


def _embed(model_id: str, input: str | Sequence[str], options: Mapping[str, Any]) -> Call[Any]:
    return Call(RequestPlan("POST", "/v1/embeddings", json=body(model=model_id, input=input, **options)), raw_json)


class Safety(SyncResource):
    """``client.safety``."""

    def run_shield(self, *, shield_id: str, messages: Sequence[Any],
                   params: Mapping[str, Any] | None = None) -> RunShieldResponse:  # fmt: skip
        """Check messages with a shield: the violation, or none."""
        return self._transport.call(_run_shield(shield_id, messages, params))


class Moderations(SyncResource):
    """``client.moderations``."""

    def create(self, *, input: str | Sequence[str], model: str | None = None) -> ModerationResponse:
        """OpenAI's moderation of each input, by a shield or guard model."""
        return self._transport.call(_moderate(input, model))


class Embeddings(SyncResource):
    """``client.embeddings``."""

    def create(self, *, model: str, input: str | Sequence[str], **options: Any) -> dict[str, Any]:
        """OpenAI's embeddings answer (``data[i].embedding``) for each input."""
        return self._transport.call(_embed(model, input, options))


class AsyncModels(_AsyncRegistry[Model]):
    """``client.models`` of an ``AsyncClient``."""

    _calls = _MODELS

    async def register(self, *, model_id: str, provider_id: str | None = None, provider_model_id: str | None = None,
                       model_type: str = "llm", metadata: Mapping[str, Any] | None = None) -> Model:  # fmt: skip
        """Register a model with a provider."""
        return await self._transport.call(self._calls.register(dict(
            model_id=model_id, provider_id=provider_id, provider_model_id=provider_model_id, model_type=model_type,
            metadata=metadata)))  # fmt: skip


class AsyncToolgroups(_AsyncRegistry[ToolGroup]):
    """``client.toolgroups`` of an ``AsyncClient``."""

    _calls = _TOOLGROUPS

    async def register(self, *, toolgroup_id: str, provider_id: str, mcp_endpoint: Mapping[str, str] | None = None,
                       args: Mapping[str, Any] | None = None) -> ToolGroup:  # fmt: skip
        """Register a toolgroup."""
        fields = dict(toolgroup_id=toolgroup_id, provider_id=provider_id, mcp_endpoint=mcp_endpoint, args=args)
        return await self._transport.call(self._calls.register(fields))


class AsyncVectorDbs(_AsyncRegistry[VectorDB]):
    """``client.vector_dbs`` of an ``AsyncClient``."""

    _calls = _VECTOR_DBS

    async def register(self, *, vector_db_id: str, embedding_model: str, **options: Any) -> VectorDB:
        """Register a vector DB."""
        fields = dict(vector_db_id=vector_db_id, embedding_model=embedding_model, **options)
        return await self._transport.call(self._calls.register(fields))


class AsyncShields(_AsyncRegistry[ShieldResource]):
    """``client.shields`` of an ``AsyncClient``."""

    _calls = _SHIELDS

    async def register(self, *, shield_id: str, provider_id: str | None = None, provider_shield_id: str | None = None,
                       params: Mapping[str, Any] | None = None) -> ShieldResource:  # fmt: skip
        """Register a shield."""
        fields = dict(shield_id=shield_id, provider_id=provider_id, provider_shield_id=provider_shield_id,
                      params=params)  # fmt: skip
        return await self._transport.call(self._calls.register(fields))


class AsyncTools(AsyncResource):
    """``client.tools`` of an ``AsyncClient``."""

    async def list(self, *, toolgroup_id: str | None = None) -> list[Tool]:
        """The server's tools (of one group if given)."""
        return await self._transport.call(_tools(toolgroup_id))

    async def retrieve(self, tool_name: str) -> Tool:
        """One tool."""
        return await self._transport.call(route_call("GET", "/v1/tools/{}", Tool, tool_name))

    async def invoke(self, tool_name: str, **kwargs: Any) -> ToolInvocationResult:
        """Run a server-side tool with the given arguments."""
        return await self._transport.call(_invoke(tool_name, kwargs))


class AsyncSafety(AsyncResource):
    """``client.safety`` of an ``AsyncClient``."""

    async def run_shield(self, *, shield_id: str, messages: Sequence[Any],
                         params: Mapping[str, Any] | None = None) -> RunShieldResponse:  # fmt: skip
        """Check messages with a shield: the violation, or none."""
        return await self._transport.call(_run_shield(shield_id, messages, params))


class AsyncModerations(AsyncResource):
    """``client.moderations`` of an ``AsyncClient``."""

    async def create(self, *, input: str | Sequence[str], model: str | None = None) -> ModerationResponse:
        """OpenAI's moderation of each input."""
        return await self._transport.call(_moderate(input, model))


class AsyncEmbeddings(AsyncResource):
    """``client.embeddings`` of an ``AsyncClient``."""

    async def create(self, *, model: str, input: str | Sequence[str], **options: Any) -> dict[str, Any]:
        """OpenAI's embeddings answer for each input."""
        return await self._transport.call(_embed(model, input, options))
