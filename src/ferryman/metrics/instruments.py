"""Every Prometheus metric the server records, in one place, with the few words that record them.

The metrics live in prometheus_client's default registry, one set per process; a server of
several ``--workers`` writes them to a shared directory that ``/metrics`` sums
(:mod:`.multiprocess`). Label values are bounded: names from the server's own configuration
(models, tools, shields), the API's own words (statuses, outcomes), route templates; never an
id, a path or a caller's text.

Names follow OpenTelemetry's semantic conventions where they have one (``gen_ai_*``,
``http_server_*``) and Prometheus's otherwise (``ferryman_*``, counters ending ``_total``).
"""

from __future__ import annotations

from typing import Literal

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

# No ``_created`` series: a timestamp per label set, a third of every scrape, that no query here needs.
disable_created_metrics()  # type: ignore[no-untyped-call]

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
"""OpenTelemetry's advice for ``gen_ai.client.token.usage``, up to four million tokens."""
GENAI_SECONDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
"""OpenTelemetry's advice for ``gen_ai.client.operation.duration``."""
HTTP_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 30.0, 60.0)
"""OpenTelemetry's advice for ``http.server.request.duration``, with 30 s and 60 s for streamed turns."""

TOKEN_USAGE = Histogram(
    "gen_ai_client_token_usage",
    "Tokens used per model call, by token type (input: the prompt, output: the answer).",
    ["gen_ai_operation_name", "gen_ai_request_model", "gen_ai_token_type"],
    buckets=TOKEN_BUCKETS,
)
OPERATION_DURATION = Histogram(
    "gen_ai_client_operation_duration_seconds",
    "Seconds per model call (a chat: from the request until its last chunk; error_type set when it failed).",
    ["gen_ai_operation_name", "gen_ai_request_model", "error_type"],
    buckets=GENAI_SECONDS,
)
HTTP_DURATION = Histogram(
    "http_server_request_duration_seconds",
    "Seconds per HTTP request (a stream: until its last event), by route template, method and status.",
    ["http_request_method", "http_route", "http_response_status_code"],
    buckets=HTTP_SECONDS,
)
TURNS = Counter(
    "ferryman_turns",
    "Runs of turns (Agents API) and responses (Responses API) that ended, by their final status.",
    ["api", "status"],
)
TURN_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0)
"""A run: from a fraction of a second (an answer from a small model) to minutes (many tool calls)."""
TURN_DURATION = Histogram(
    "ferryman_turn_duration_seconds",
    "Seconds per run of a turn or response, from its start until its outcome was stored, by its final status.",
    ["api", "status"],
    buckets=TURN_SECONDS,
)
RUNNING_TURNS = Gauge(
    "ferryman_running_turns",
    "Runs of turns and responses running now.",
    ["api"],
    multiprocess_mode="livesum",
)
FIRST_EVENT = Histogram(
    "ferryman_time_to_first_event_seconds",
    "Seconds from a run's start to its first event of model output (text or a tool call) sent to clients.",
    ["api"],
    buckets=GENAI_SECONDS,
)
TOOL_CALLS = Counter(
    "ferryman_tool_calls",
    "Server-side tool calls, by tool (the server's own by name, an MCP server's as mcp) and outcome"
    " (ok, error, unknown_tool, invalid_arguments).",
    ["tool", "outcome"],
)
SHIELD_VERDICTS = Counter(
    "ferryman_shield_verdicts",
    "Shield checks in turns and responses, by shield and verdict (pass, redact, warn, block, error).",
    ["shield", "verdict"],
)
APPROVALS_WAITING = Gauge(
    "ferryman_approvals_waiting",
    "Tool calls awaiting a person's approval, requested and not yet decided since the server started.",
    multiprocess_mode="sum",
)
LEASE_EXPIRIES = Counter(
    "ferryman_lease_expiries",
    "Running turns failed because the lease of the replica running them ran out (it stopped or stalled).",
    ["lease"],
)
IDEMPOTENT_REPLAYS = Counter(
    "ferryman_idempotent_replays",
    "Requests answered with the stored outcome of an earlier request with the same Idempotency-Key.",
)
QUOTA_REFUSALS = Counter(
    "ferryman_quota_refusals",
    "Requests refused (429) by a caller's quota: requests per minute, or running turns.",
    ["quota"],
)
INGESTION_BACKLOG = Gauge(
    "ferryman_ingestion_backlog_files",
    "Files attached to vector stores and not processed yet (waiting or in progress, on any replica).",
    multiprocess_mode="mostrecent",
)

SCHEDULE_LOOKS = Counter(
    "ferryman_schedule_looks",
    "Looks this replica made for due schedules (one every schedules.poll_interval_seconds).",
)
SCHEDULE_RUNS = Counter(
    "ferryman_schedule_runs",
    "Ticks of schedules this replica fired, by outcome (started: a turn started; failed: none could start).",
    ["outcome"],
)

Api = Literal["agents", "responses"]
ToolOutcome = Literal["ok", "error", "unknown_tool", "invalid_arguments"]
Verdict = Literal["pass", "redact", "warn", "block", "error"]
Quota = Literal["requests", "running_turns"]


def turn_started(api: Api) -> None:
    """A run of a turn or response started in this process."""
    RUNNING_TURNS.labels(api).inc()


def turn_ended(api: Api, status: str, seconds: float) -> None:
    """A run ended with ``status`` (the API's own word: ``completed``, ``failed``, ``awaiting_input``...),
    ``seconds`` after it started."""
    RUNNING_TURNS.labels(api).dec()
    TURNS.labels(api, status).inc()
    TURN_DURATION.labels(api, status).observe(seconds)


def first_event(api: Api, seconds: float) -> None:
    """A run sent its first model output ``seconds`` after it started."""
    FIRST_EVENT.labels(api).observe(seconds)


def tool_called(tool: str, outcome: ToolOutcome) -> None:
    """A server tool call ended (``tool``: one of the server's own tools, ``mcp`` for any tool an MCP server
    listed, whose name that server chose, or ``unknown`` for a name the turn does not offer)."""
    TOOL_CALLS.labels(tool, outcome).inc()


def shield_judged(shield: str, verdict: Verdict) -> None:
    """A shield gave its verdict in a turn."""
    SHIELD_VERDICTS.labels(shield, verdict).inc()


def approvals_requested(count: int) -> None:
    """A run stopped on ``count`` calls that need approval."""
    if count:
        APPROVALS_WAITING.inc(count)


def approvals_decided(count: int) -> None:
    """A caller approved or denied ``count`` calls."""
    if count:
        APPROVALS_WAITING.dec(count)


def leases_expired(lease: Literal["turn"], count: int) -> None:
    """``count`` leases of kind ``lease`` ran out and what they held was failed."""
    if count:
        LEASE_EXPIRIES.labels(lease).inc(count)


def replayed() -> None:
    """A request was answered from an earlier one's stored outcome (its Idempotency-Key)."""
    IDEMPOTENT_REPLAYS.inc()


def quota_refused(quota: Quota) -> None:
    """A request was refused by a caller's ``quota``."""
    QUOTA_REFUSALS.labels(quota).inc()
