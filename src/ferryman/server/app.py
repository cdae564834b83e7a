"""Assembling the server: services from settings, and the ASGI app over them."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount

from ferryman.api.registry import Model
from ferryman.audit_settings import AuditSettings
from ferryman.auth.bearer import authenticator_for
from ferryman.auth.policy import AccessPolicy, parse_policy
from ferryman.auth.principal import Authenticator
from ferryman.auth.quotas import Quotas, quotas_for
from ferryman.config import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_PAGE_ITEMS,
    EMBEDDED_TYPE,
    SHARED_DB_PREFIXES,
    KnowledgeSettings,
    MemorySettings,
    ProviderSettings,
    Settings,
    ToolSettings,
    UsageSettings,
)
from ferryman.context_settings import ContextSettings
from ferryman.coordination.base import CancelTurns, Fanout, LocalFanout, Notice, RecordDeleted
from ferryman.coordination.select import fanout_for, quota_counters_for
from ferryman.embedded_settings import Runtime
from ferryman.engine.channel import TurnRunner
from ferryman.engine.loop import TurnEngine
from ferryman.file_settings import FileSettings
from ferryman.inference.base import InferenceProvider
from ferryman.inference.embedded_runtime import DEFAULT_CONTEXT_LENGTH
from ferryman.inference.local_embeddings import PROVIDER_ID as LOCAL_EMBEDDINGS
from ferryman.inference.local_embeddings import LocalEmbeddingProvider, local_embeddings_available
from ferryman.inference.openai_remote import OpenAICompatibleProvider
from ferryman.inference.provider_data import provider_kind
from ferryman.inference.router import ModelRouter
from ferryman.knowledge.blobs import BlobStore, LocalBlobStore, MemoryBlobStore
from ferryman.knowledge.ingest import IngestionWorker
from ferryman.knowledge.isolated import ExtractionLimits
from ferryman.knowledge.search import SearchService
from ferryman.metrics.multiprocess import process_ended
from ferryman.safe_fetch import FetchPolicy
from ferryman.safety.base import ShieldRegistry
from ferryman.safety.llama_guard import LlamaGuardProvider
from ferryman.safety.local import LocalShieldProvider
from ferryman.safety_settings import SafetySettings
from ferryman.sandbox import Sandbox
from ferryman.schedule_settings import ScheduleSettings
from ferryman.services.access import Access
from ferryman.services.agent_memory import AgentMemory
from ferryman.services.agents import AgentService
from ferryman.services.approval_holds import ApprovalHolds
from ferryman.services.approval_sweep import ApprovalSweep
from ferryman.services.approvals import ApprovalService
from ferryman.services.audit import AuditService
from ferryman.services.checked_records import CheckedRecords
from ferryman.services.file_expiry import FileExpiry
from ferryman.services.files import FileService
from ferryman.services.host import TurnHost
from ferryman.services.idempotency import IdempotencyKeys
from ferryman.services.leases import TurnLeases
from ferryman.services.models import ModelService
from ferryman.services.openai_compat import OpenAICompatService
from ferryman.services.record_guard import RecordGuard
from ferryman.services.registrations import Registrations
from ferryman.services.responses.conversations import ConversationService
from ferryman.services.responses.history import HistoryCache
from ferryman.services.responses.hosted.catalog import hosted_tools
from ferryman.services.responses.service import ResponsesService
from ferryman.services.safety import SafetyService
from ferryman.services.scheduler import Scheduler
from ferryman.services.schedules import Clock, ScheduleService
from ferryman.services.session_memory import SessionMemory
from ferryman.services.toolgroups import ToolGroupService
from ferryman.services.turn_queue import ROLLBACK_WAIT_SECONDS
from ferryman.services.usage import UsageLedger
from ferryman.services.vector_dbs import VectorDbService
from ferryman.services.vector_stores import VectorStoreService
from ferryman.services.webhooks import Webhooks
from ferryman.storage.base import Store
from ferryman.storage.domain import registry as registry_records
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.domain.approvals import HeldCalls
from ferryman.storage.domain.conversations import conversations as conversations_of
from ferryman.storage.domain.memory_blocks import MemoryBlocks
from ferryman.storage.domain.schedules import ScheduleRecords
from ferryman.storage.select import store_for
from ferryman.tools.code_interpreter import TOOLGROUP_ID as CODE_INTERPRETER
from ferryman.tools.code_interpreter import CodeInterpreter
from ferryman.tools.mcp.pool import McpClientPool, McpSettings
from ferryman.tools.memory import TOOLGROUP_ID as MEMORY_TOOLGROUP
from ferryman.tools.memory import MemoryTool
from ferryman.tools.registry import ToolRegistry, builtin_tools
from ferryman.tools.websearch import WebSearch
from ferryman.trace_settings import TraceSettings
from ferryman.webhook_settings import WebhookSettings
from ferryman.websearch_settings import WebSearchSettings

from . import (
    agents_routes,
    approvals_routes,
    audit_routes,
    files_routes,
    memory_routes,
    openai_routes,
    responses_routes,
    safety_routes,
    schedule_routes,
    system_routes,
    tool_routes,
    usage_routes,
    vector_io_routes,
    vector_store_routes,
    webhook_routes,
)
from .access_log import AccessLogMiddleware
from .audit_scope import AuditMiddleware
from .authn import AuthenticationMiddleware
from .body_limit import FORM_OVERHEAD, BodyLimit, BodyLimitMiddleware, upload_routes
from .console_routes import console_routes
from .contract import starlette_routes
from .errors import EXCEPTION_HANDLERS
from .heap import settle_heap
from .http_metrics import HttpMetricsMiddleware
from .http_spans import TracingMiddleware
from .metrics_routes import MetricsServed, metrics_routes, metrics_served
from .openapi import docs_routes, openapi_document
from .ratelimit import RateLimitMiddleware
from .tracing import Tracing

log = logging.getLogger(__name__)


@dataclass
class Services:
    """Everything the routers are built over."""

    store: Store
    models: ModelRouter
    model_registry: ModelService
    tools: ToolRegistry
    toolgroups: ToolGroupService
    mcp: McpClientPool
    shields: ShieldRegistry
    runner: TurnRunner
    leases: TurnLeases
    fanout: Fanout
    agents: AgentService
    openai: OpenAICompatService
    responses: ResponsesService
    conversations: ConversationService
    vector_dbs: VectorDbService
    files: FileService
    vector_stores: VectorStoreService
    search: SearchService
    ingestion: IngestionWorker
    quotas: Quotas
    authenticator: Authenticator | None = None
    sandbox: Sandbox | None = None
    web_search: WebSearch | None = None
    safety: SafetyService = field(kw_only=True)
    usage: UsageLedger = field(kw_only=True)
    """Runs' token usage, summed by ``GET /v1/usage``."""
    audit: AuditService = field(kw_only=True)
    """Audit records: written by every create, delete and denial, listed by ``GET /v1/audit``."""
    webhooks: Webhooks = field(kw_only=True)
    """Runs' ends posted to their webhooks from the outbox, listed by ``GET /v1/webhook_deliveries``."""
    schedules: ScheduleService = field(kw_only=True)
    """Cron schedules (``/v1/schedules``) and their runs."""
    scheduler: Scheduler = field(kw_only=True)
    """Fires due schedules (``schedules.fire``), starting their turns."""
    agent_memory: AgentMemory = field(kw_only=True)
    """Agents' memory blocks (``/v1/agents/{agent_id}/memory``, ``builtin::memory``)."""
    approvals: ApprovalService = field(kw_only=True)
    """The server tool calls waiting for approval, listed and decided by ``/v1/approvals``."""
    approval_sweep: ApprovalSweep = field(kw_only=True)
    """Continues the runs whose approvals were decided by a process that died before continuing them."""
    file_expiry: FileExpiry = field(kw_only=True)
    """Deletes the files whose expiry (``expires_after`` at upload) has come."""
    max_body_bytes: int = field(default=DEFAULT_MAX_BODY_BYTES, kw_only=True)
    """The largest JSON request body (``server.max_body_bytes``); uploads are bounded by ``files.max_bytes``."""
    max_page_items: int = field(default=DEFAULT_MAX_PAGE_ITEMS, kw_only=True)
    """The most agents or sessions on one page of the Agents API's lists (``server.max_page_items``)."""
    policy: AccessPolicy = field(default_factory=AccessPolicy, kw_only=True)
    """Who may do what (records' access is enforced by the store; this decides who reads ``/metrics``)."""
    metrics: MetricsServed = field(default="here", kw_only=True)
    """Where the metrics are served: ``/metrics`` here, on a separate listener, or nowhere (not even recorded
    per HTTP request)."""
    tracing: TraceSettings | None = field(default=None, kw_only=True)
    """``telemetry.traces``: whether and where traces go (None: the defaults, off unless ``OTEL_*`` variables ask)."""
    idempotency: IdempotencyKeys = field(init=False)
    """The ``Idempotency-Key`` claims of creates (``server/idempotent_routes.py``), in the store."""

    def __post_init__(self) -> None:
        self.idempotency = IdempotencyKeys(self.store)


def build_services(
    store: Store,
    providers: list[InferenceProvider],
    configured_models: list[Model] | None = None,
    tools: ToolRegistry | None = None,
    shields: ShieldRegistry | None = None,
    fanout: Fanout | None = None,
    lease_seconds: float = 30.0,
    sole_process: bool = False,
    fetch: FetchPolicy | None = None,
    quotas: Quotas | None = None,
    policy: AccessPolicy | None = None,
    authenticator: Authenticator | None = None,
    blobs: BlobStore | None = None,
    files: FileSettings | None = None,
    knowledge: KnowledgeSettings | None = None,
    tool_settings: ToolSettings | None = None,
    sandbox: Sandbox | None = None,
    websearch: WebSearchSettings | None = None,
    safety_settings: SafetySettings | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_page_items: int = DEFAULT_MAX_PAGE_ITEMS,
    metrics: MetricsServed = "here",
    tracing: TraceSettings | None = None,
    usage: UsageSettings | None = None,
    audit: AuditSettings | None = None,
    memory: MemorySettings | None = None,
    webhooks: WebhookSettings | None = None,
    schedules: ScheduleSettings | None = None,
    clock: Clock = time.time,
    context: ContextSettings | None = None,
    rollback_wait_seconds: float = ROLLBACK_WAIT_SECONDS,
) -> Services:
    """Wire the services over a store and inference providers.

    ``fanout`` connects this process to the other replicas (none by default);
    ``lease_seconds`` is how long a running turn's lease lasts unrenewed;
    ``sole_process`` says no other process runs turns of this store (SQLite);
    ``fetch`` bounds what client-named URLs (a turn's documents) may reach;
    ``quotas`` limits each caller's requests and running turns (none by default);
    ``policy`` says who may do what with whose records (default: each caller its own);
    ``authenticator`` proves who calls (None: authentication off, every request runs as the server);
    ``blobs`` holds uploaded files' bytes (default: in this process's memory), ``files`` their limits;
    ``knowledge`` says when a turn's documents are retrieved from rather than inlined.
    ``tool_settings`` bounds the server tools (MCP timeouts);
    ``sandbox`` runs ``builtin::code_interpreter`` (None: that toolgroup is not offered);
    ``websearch`` picks ``builtin::websearch``'s provider (offered in the default registry, configured or not);
    ``safety_settings`` says whether what shields block is also kept, raw, for review (off by default);
    ``max_body_bytes`` bounds a JSON request body (``files.max_bytes`` an upload);
    ``max_page_items`` a page of agents or sessions;
    ``metrics`` says where the Prometheus metrics are served (``/metrics`` by default);
    ``tracing`` whether and where traces are exported (``telemetry.traces``; off by default);
    ``usage`` bounds the token usage summaries (``usage.max_records``);
    ``audit`` how audit records are queued, kept (``audit.retention_days``) and listed;
    ``memory`` bounds agents' memory blocks (``memory.*``);
    ``webhooks`` signs runs' webhook events and bounds their deliveries (``webhooks.*``);
    ``context`` seals compaction items and names the model that writes summaries (``context.*``);
    ``schedules`` how often due schedules are fired and their bounds (``schedules.*``), read on ``clock``;
    ``rollback_wait_seconds`` is the most a rollback waits for the turn it cancelled to stop
    (``storage.rollback_wait_seconds``).
    """
    policy = policy or AccessPolicy()
    access = Access(policy)
    guard = RecordGuard(store, access)
    models = ModelRouter(providers, configured_models)
    fanout = fanout or LocalFanout()
    registry = ModelService(
        models,
        Registrations(registry_records.models(store.kernel), access, store),
        list(configured_models or []),
        fanout,
    )
    files = files or FileSettings()
    blobs = blobs or MemoryBlobStore()
    file_service = FileService(store.kernel, access, store, blobs, files.max_bytes, keyed=store)
    ingestion = IngestionWorker(
        store,
        blobs,
        models,
        lease_seconds=files.ingestion_lease_seconds,
        sole_process=sole_process,
        extraction=ExtractionLimits(files.extraction_memory_mb, files.extraction_timeout_seconds),
    )
    vector_stores = VectorStoreService(store, store.kernel, access, models, file_service, ingestion.wake)
    search = SearchService(store, models, vector_stores, file_service.readable_names)
    tool_settings = tool_settings or ToolSettings()
    web_search = WebSearch(websearch)
    agent_memory = AgentMemory(store, MemoryBlocks(store.kernel), access, memory or MemorySettings(), models)
    if tools is None:  # a given registry is the caller's whole choice of builtin groups
        tools = builtin_tools(search, tool_settings.max_output_chars, web_search)
        tools.register(MEMORY_TOOLGROUP, [MemoryTool(agent_memory)])
    mcp = McpClientPool(
        fetch or FetchPolicy(),
        McpSettings(
            timeout_seconds=tool_settings.mcp_timeout_seconds,
            connect_timeout_seconds=tool_settings.mcp_connect_timeout_seconds,
            idle_seconds=tool_settings.mcp_idle_seconds,
        ),
    )
    if sandbox is not None:
        tools.register(CODE_INTERPRETER, [CodeInterpreter(sandbox, file_service)])
    toolgroups = ToolGroupService(tools, Registrations(registry_records.toolgroups(store.kernel), access, store), mcp)
    shields = shields or ShieldRegistry()
    shields.add_provider(LlamaGuardProvider(models))
    shields.add_provider(LocalShieldProvider())
    safety = SafetyService(shields, Registrations(registry_records.shields(store.kernel), access, store), models)
    runner = TurnRunner()
    leases = TurnLeases(store, runner, lease_seconds, sole_process)
    keep_blocked_text = safety_settings.keep_blocked_text if safety_settings else False
    context = context or ContextSettings()
    engine = TurnEngine(
        store,
        models,
        SessionMemory(vector_stores, search),
        keep_blocked_text=keep_blocked_text,
        summary_model=context.summary_model,
    )
    quotas = quotas or Quotas()
    ledger = UsageLedger(store.kernel, access, (usage or UsageSettings()).max_records)
    outbox = Webhooks(store.kernel, access, fetch, webhooks)
    host = TurnHost(store, guard, engine, runner, leases, fanout, quotas, ledger, outbox, rollback_wait_seconds)
    knowledge = knowledge or KnowledgeSettings()
    holds = ApprovalHolds(store, HeldCalls(store.kernel))
    agents = AgentService(
        host,
        models,
        tools,
        shields,
        fetch,
        SessionMemory(vector_stores, search),
        inline_document_tokens=knowledge.inline_document_tokens,
        blocks=agent_memory,
        holds=holds,
        access=access,
    )
    agents.on_session_deleted(holds.forget)
    if sandbox is not None:
        agents.on_session_deleted(sandbox.remove)
    interpreter = CodeInterpreter(sandbox, file_service) if sandbox else None
    hosted = hosted_tools(search, vector_stores, mcp, interpreter, web_search)
    conversation_records = CheckedRecords(conversations_of(store.kernel), access)
    responses = ResponsesService(host, models, HistoryCache(), hosted, conversation_records, shields, holds, context)
    schedule_service = ScheduleService(
        ScheduleRecords(store.kernel), access, store, schedules or ScheduleSettings(), clock
    )
    conversations = ConversationService(store, conversation_records, guard)
    conversations.on_session_deleted(holds.forget)  # the held calls of the responses made in it
    approvals = ApprovalService(
        holds.calls,
        access,
        store,
        guard,
        agents,
        responses,
        subject_lifetime_seconds=schedule_service.settings.subject_lifetime_seconds,
        clock=clock,
    )
    if sandbox is not None:
        # A container goes with its conversation, or with the first response of its chain.
        responses.on_session_deleted(sandbox.remove)
        conversations.on_session_deleted(sandbox.remove)
    return Services(
        store,
        models,
        registry,
        tools,
        toolgroups,
        mcp,
        shields,
        runner,
        leases,
        fanout,
        agents,
        OpenAICompatService(models),
        responses,
        conversations,
        VectorDbService(models, vector_stores, search, fetch),
        file_service,
        vector_stores,
        search,
        ingestion,
        quotas,
        authenticator,
        sandbox,
        web_search=web_search,
        safety=safety,
        max_body_bytes=max_body_bytes,
        max_page_items=max_page_items,
        policy=policy,
        metrics=metrics,
        tracing=tracing,
        usage=ledger,
        audit=AuditService(store.kernel, access, audit),
        webhooks=outbox,
        schedules=schedule_service,
        scheduler=Scheduler(schedule_service, agents),
        agent_memory=agent_memory,
        approvals=approvals,
        approval_sweep=ApprovalSweep(approvals, holds.calls, store),
        file_expiry=FileExpiry(file_service),
    )


def _provider(settings: ProviderSettings, runtime: Runtime = "auto") -> InferenceProvider:
    if settings.type == EMBEDDED_TYPE:
        # The runtimes, chat templates and tool-call parsing load only where an embedded model is served.
        from ferryman.inference.embedded import EmbeddedProvider

        n_ctx = settings.context_length or DEFAULT_CONTEXT_LENGTH
        return EmbeddedProvider(
            settings.provider_id,
            settings.model_path,
            settings.model_id,
            n_ctx,
            runtime=runtime,
            prompt_cache_mb=settings.prompt_cache_mb,
        )
    return OpenAICompatibleProvider(
        settings.provider_id,
        settings.url or "",
        settings.api_key,
        settings.timeout,
        settings.max_retries,
        kind=provider_kind(settings.type),
        context_length=settings.context_length,
    )


def services_from_settings(settings: Settings) -> Services:
    """Build the services a ``ferryman serve`` process runs."""
    providers = [_provider(p, settings.embedded.runtime) for p in settings.providers]
    if settings.embeddings.local and local_embeddings_available():
        if all(provider.provider_id != LOCAL_EMBEDDINGS for provider in providers):
            providers.append(LocalEmbeddingProvider())
    configured = [
        Model(
            identifier=m.model_id,
            provider_id=m.provider_id,
            provider_resource_id=m.provider_model_id or m.model_id,
            model_type="embedding" if m.model_type == "embedding" else "llm",
            metadata=m.metadata,
        )
        for m in settings.models
    ]
    store = store_for(settings.db_path())
    services = build_services(
        store,
        providers,
        configured,
        fanout=fanout_for(settings.coordination_url()),
        lease_seconds=settings.storage.turn_lease_seconds,
        rollback_wait_seconds=settings.storage.rollback_wait_seconds,
        sole_process=not settings.db_path().startswith(SHARED_DB_PREFIXES),
        fetch=settings.fetch,
        authenticator=authenticator_for(settings.auth, ApiKeys(store.kernel)),
        policy=parse_policy(settings.auth.access_policy) if settings.auth is not None else None,
        quotas=quotas_for(
            settings.quotas, quota_counters_for(settings.coordination_url(), settings.storage.turn_lease_seconds)
        ),
        blobs=LocalBlobStore(settings.files.directory()),
        files=settings.files,
        knowledge=settings.knowledge,
        sandbox=Sandbox(settings.sandbox),
        websearch=settings.websearch,
        safety_settings=settings.safety,
        tool_settings=settings.tools,
        max_body_bytes=settings.max_body_bytes,
        max_page_items=settings.max_page_items,
        metrics=metrics_served(settings.telemetry),
        tracing=settings.telemetry.traces,
        usage=settings.usage,
        audit=settings.audit,
        memory=settings.memory,
        webhooks=settings.webhooks,
        schedules=settings.schedules,
        context=settings.context,
    )
    services.models.default_embedding_model = settings.embeddings.default_model
    return services


SETTINGS_ENV = "FERRYMAN_SERVE_SETTINGS"
"""Carries the settings to worker processes, which import the app by name."""


def app_from_environment() -> Starlette:
    """The app of one ``--workers`` process, built from the settings its parent left in the environment."""
    settings = Settings.model_validate_json(os.environ[SETTINGS_ENV])
    return create_app(services_from_settings(settings), settle=True)


async def _act_on(services: Services, notice: Notice) -> None:
    """What this replica does when any replica sends a notice."""
    if isinstance(notice, CancelTurns):
        await services.runner.cancel_owned_by(notice.owner, notice.reason)
    elif isinstance(notice, RecordDeleted):
        if notice.kind in (None, "agent"):
            services.agents.forget(notice.record_id)
        if notice.kind in (None, "response"):
            services.responses.forget(notice.record_id)
    else:
        await services.model_registry.reload()


API_MOUNTS = (
    (
        "/v1",
        (
            *agents_routes.ROUTES,
            *memory_routes.ROUTES,
            *system_routes.ROUTES,
            *tool_routes.ROUTES,
            *openai_routes.ROUTES,
            *responses_routes.ROUTES,
            *files_routes.ROUTES,
            *vector_store_routes.ROUTES,
            *vector_io_routes.ROUTES,
            *safety_routes.ROUTES,
            *usage_routes.ROUTES,
            *audit_routes.ROUTES,
            *approvals_routes.ROUTES,
            *webhook_routes.ROUTES,
            *schedule_routes.ROUTES,
        ),
    ),
    ("/v1alpha", agents_routes.ROUTES),
)
"""Every route table under its prefix: the source of both the app's routes and its OpenAPI document."""


@functools.cache
def openapi() -> dict[str, Any]:
    """The OpenAPI document of :data:`API_MOUNTS`, built when first asked for.

    Not at import: a server whose document is never fetched does not hold it (about 3 MiB of dicts).
    """
    return openapi_document(API_MOUNTS)


UPLOAD_ROUTES = upload_routes(API_MOUNTS)


def create_app(services: Services, settle: bool = False) -> Starlette:
    """The ASGI app: routes under ``/v1`` (agents also under ``/v1alpha``), the OpenAPI document and its page.

    The endpoints find ``services`` in the app's state. ``settle``: once started, the process's heap is
    settled (``heap.py``); for a serving process only.
    """

    tracing = Tracing.of(services.tracing)

    @contextlib.asynccontextmanager
    async def traced(app: Starlette) -> AsyncIterator[None]:
        tracing.start()
        try:
            async with lifespan(app):
                yield
        finally:
            tracing.stop()  # after the runs ended: their spans are exported too

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await services.store.open()
        await services.fanout.open(lambda notice: _act_on(services, notice))
        await services.quotas.open()
        # Fails first what a stopped replica (or this one, before a restart) left running.
        await services.leases.start()
        await services.model_registry.load()
        await services.ingestion.start()
        await services.audit.start()
        await services.webhooks.start()
        await services.scheduler.start()
        await services.approval_sweep.start()
        await services.file_expiry.start()
        if settle:
            settle_heap()
        try:
            yield
        finally:
            await services.ingestion.stop()
            await services.scheduler.stop()  # before the runs end: it starts none after
            await services.approval_sweep.stop()  # likewise
            await services.file_expiry.stop()
            await services.runner.shutdown()
            await services.usage.flush()  # the runs' usage writes still under way
            await services.audit.stop()  # after the runs ended: what they audited is written too
            await services.webhooks.stop()  # after the runs ended: their events wait in the outbox
            if services.sandbox is not None:
                await services.sandbox.close()
            await services.mcp.close()
            if services.web_search is not None:
                await services.web_search.close()
            await services.leases.stop()
            await services.quotas.close()
            await services.fanout.close()
            await services.models.aclose()
            await services.store.close()
            process_ended()  # this worker's running-turn gauge leaves the sums of a server of several

    routes = [
        *(Mount(prefix, routes=starlette_routes(table)) for prefix, table in API_MOUNTS),
        *docs_routes(),
        *console_routes(),
    ]
    if services.metrics == "here":
        routes.extend(metrics_routes())
    app = Starlette(
        routes=routes,
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=traced,
        middleware=[
            # Outermost: each request's server span, current for everything inside (its access line's trace id).
            *([Middleware(TracingMiddleware, routes=routes)] if tracing.on else []),
            # Every request gets its id, and its access line, however it is answered.
            Middleware(AccessLogMiddleware, routes=routes),
            # Audit records go to this app's sink, with the request's id (named just above); every 429 audited.
            Middleware(AuditMiddleware, sink=services.audit.trail, routes=routes),
            # Times every request, refusals included (nothing when metrics are off).
            *([Middleware(HttpMetricsMiddleware, routes=routes)] if services.metrics != "off" else []),
            # Then everything inside runs as the caller it names.
            Middleware(AuthenticationMiddleware, authenticator=services.authenticator),
            # After authentication named the caller; before anything a refused request should not touch.
            Middleware(RateLimitMiddleware, quotas=services.quotas),
            # Before anything reads a body: a body over its limit is refused while it arrives.
            Middleware(
                BodyLimitMiddleware,
                body=BodyLimit(services.max_body_bytes, "server.max_body_bytes"),
                upload=BodyLimit(services.files.max_bytes, "files.max_bytes", "file", "file", FORM_OVERHEAD),
                uploads=UPLOAD_ROUTES,
            ),
        ],
    )
    app.state.services = services
    app.state.openapi = openapi
    return app
