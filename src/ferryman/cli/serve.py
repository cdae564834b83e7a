"""``ferryman serve``: run the server (in the foreground, or in the background with ``--detach``)."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from typing import Any

import uvicorn

from ferryman.config import (
    EMBEDDED_TYPE,
    SHARED_DB_PREFIXES,
    Settings,
    StorageSettings,
    load_settings,
    providers_from_urls,
)
from ferryman.coordination.select import fanout_for
from ferryman.errors import ConfigurationError
from ferryman.inference.embedded_runtime import (
    DEFAULT_MODEL_ID,
    INSTALL_HINT,
    embedded_available,
    pick_runtime,
    runtime_hint,
)
from ferryman.logs import configure_logging, logging_config
from ferryman.metrics.listener import serving_metrics
from ferryman.server.app import SETTINGS_ENV, create_app, services_from_settings
from ferryman.storage.select import store_for

from . import detach
from .arguments import (
    check_listen,
    check_paths,
    guarded,
    http_url,
    non_negative_int,
    port,
    positive,
    positive_int,
    redis_url,
)
from .embedded_providers import EMBEDDED_PROVIDER, embedded_providers
from .migrate_apart import migrate_apart
from .serve_model import model_to_serve

log = logging.getLogger("ferryman")


def add_arguments(serve: argparse.ArgumentParser) -> None:
    """Add the arguments of ``ferryman serve`` to its parser."""
    _add_serve_arguments(serve)
    serve.add_argument(
        "--detach",
        action="store_true",
        help="run in the background (log: $FERRYMAN_HOME/server.log, pidfile: $FERRYMAN_HOME/server.pid); "
        "return once it answers, printing its URL and pid ('ferryman stop' stops it)",
    )
    serve.add_argument(
        "--pull",
        action="store_true",
        help="download a --model OWNER/NAME/FILE.gguf not pulled yet without asking (needed without a terminal)",
    )
    serve.add_argument("--json", action="store_true", help="with --detach: print the URL and pid as one JSON document")
    serve.set_defaults(local=serve_command)


_NOT_PASSED_ON = frozenset({"help", "detach", "pull", "json"})
"""``serve`` flags that the detached server process does not get (the model is pulled before it starts)."""


def _add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """The flags of the server itself (what ``--detach`` passes on to the process it starts)."""
    serve.add_argument("--config", help="YAML config file (providers, models, storage)")
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=port, help="port to bind (default 8321)")
    serve.add_argument(
        "--keep-alive",
        type=positive,
        metavar="SECONDS",
        help="how long an idle HTTP connection stays open (default 65: longer than client pools keep theirs)",
    )
    serve.add_argument(
        "--db",
        help="SQLite path or sqlite:///PATH (default $FERRYMAN_HOME/ferryman.db), or a postgresql:// or redis:// URL",
    )
    serve.add_argument(
        "--redis",
        type=redis_url,
        metavar="URL",
        help="redis:// URL that replicas share live events and cancellations through (with a postgresql:// --db)",
    )
    serve.add_argument(
        "--turn-lease",
        type=positive,
        metavar="SECONDS",
        help="a turn whose replica stops renewing its lease this long is failed by another (default 30)",
    )
    serve.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="server processes on this port (more than 1 needs a postgresql:// or redis:// --db and --redis)",
    )
    serve.add_argument(
        "--inference-url",
        type=http_url,
        action="append",
        default=[],
        help="base URL of an OpenAI-compatible server (…/v1); repeat for several",
    )
    serve.add_argument(
        "--model",
        metavar="NAME",
        help="the default embedded model: a model pulled with 'ferryman models pull', a .gguf file, or a file "
        "on the Hugging Face Hub (OWNER/NAME/FILE.gguf or hf://OWNER/NAME/FILE), pulled first if missing "
        f"(default: {DEFAULT_MODEL_ID})",
    )
    serve.add_argument("--inference-timeout", type=positive, help="seconds allowed per upstream request (default 120)")
    serve.add_argument(
        "--inference-retries", type=non_negative_int, help="retries on connection errors, 429 and 5xx (default 2)"
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="each log record as one text line or one JSON object (default: server.log_format, else text)",
    )
    serve.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve a non-loopback address without authentication (anyone who reaches it can do anything)",
    )


def _detached_arguments(args: argparse.Namespace, model: str | None) -> list[str]:
    """The flags that start the same server as ``args`` (``--model`` as resolved), without ``--detach``."""
    parser = argparse.ArgumentParser(add_help=False)
    _add_serve_arguments(parser)
    flags: list[str] = []
    for action in parser._actions:
        if action.dest in _NOT_PASSED_ON or not action.option_strings:
            continue
        value = model if action.dest == "model" else getattr(args, action.dest)
        if value is None or value == action.default:
            continue
        flag = action.option_strings[0]
        if action.nargs == 0:  # a switch
            flags.append(flag)
        else:
            for item in value if isinstance(value, list) else [value]:
                flags += [flag, str(item)]
    return flags


def _settings(args: argparse.Namespace) -> Settings:
    """The config file's settings, overridden by the flags given."""
    settings = load_settings(args.config)
    updates: dict[str, object] = {}
    if args.host:
        updates["host"] = args.host
    if args.port:
        updates["port"] = args.port
    if args.keep_alive:
        updates["keep_alive"] = args.keep_alive
    if args.log_format:
        updates["log_format"] = args.log_format
    flags = (("db", args.db), ("redis", args.redis), ("turn_lease_seconds", args.turn_lease))
    storage = {key: value for key, value in flags if value is not None}
    if storage:
        updates["storage"] = StorageSettings.model_validate(settings.storage.model_dump() | storage)
    if args.inference_url:
        updates["providers"] = providers_from_urls(args.inference_url, args.inference_timeout, args.inference_retries)
    return settings.model_copy(update=updates)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _refusal(settings: Settings, workers: int, insecure_no_auth: bool = False, model: str | None = None) -> str | None:
    """Why these settings cannot be served as asked (``model``: ``--model``), if they cannot."""
    if settings.auth is None and not insecure_no_auth and not _is_loopback(settings.host):
        return (
            f"refusing to serve {settings.host} without authentication: configure server.auth "
            "(see docs/apis/auth.md) or pass --insecure-no-auth"
        )
    if workers > 1 and not settings.shares_state():
        return (
            f"--workers {workers} needs state that several processes can share: a PostgreSQL "
            "(or Redis) --db, plus --redis for live events; SQLite serves one process (for example "
            f"'ferryman serve --workers {workers} --db postgresql://USER@HOST/DB --redis redis://HOST:6379/0'; "
            "see docs/operations/replicas.md)"
        )
    if not settings.providers:
        available, why = _embedded_runs(settings, model is None or model == DEFAULT_MODEL_ID)
        if not available:
            hint = "" if INSTALL_HINT in why else f" (install the 'local' extra: {INSTALL_HINT})"
            return (
                f"no inference provider configured, and the embedded model is not usable: {why}{hint}; "
                "see docs/apis/models.md, "
                "or pass --inference-url http://HOST:PORT/v1 for any OpenAI-compatible server."
            )
    elif any(provider.type == EMBEDDED_TYPE for provider in settings.providers):
        smollm2 = any(p.type == EMBEDDED_TYPE and p.model_path is None for p in settings.providers)
        available, why = _embedded_runs(settings, smollm2)
        if not available:
            return f"a provider of type {EMBEDDED_TYPE} is configured, but {why}"
    return None


def _embedded_runs(settings: Settings, smollm2: bool) -> tuple[bool, str]:
    """Whether the embedded runtime is installed (and SmolLM2's package, when ``smollm2`` is served); why not."""
    if smollm2:
        return embedded_available(settings.embedded.runtime)
    if pick_runtime(settings.embedded.runtime) is None:
        return False, f"the embedded model cannot run: {runtime_hint(settings.embedded.runtime)}"
    return True, ""


def _check_backends(settings: Settings) -> None:
    """Fail now, in this process (not in each worker), on a backend whose extra is missing; nothing connects.

    Raises:
        MissingExtraError: the extra a backend needs is not installed.
    """
    store_for(settings.db_path())
    fanout_for(settings.coordination_url())


@guarded
def serve_command(args: argparse.Namespace) -> int:
    """Run the server until interrupted.

    Raises:
        ConfigurationError: an argument or the config file is invalid (nothing was started or created).
    """
    if args.json and not args.detach:
        raise ConfigurationError("--json goes with --detach (a server in the foreground prints its log)")
    settings = _settings(args)
    check_paths(settings)
    refusal = _refusal(settings, args.workers, args.insecure_no_auth, args.model)
    if refusal:
        print(f"ferryman: {refusal}", file=sys.stderr)
        return 2
    _check_backends(settings)
    model = model_to_serve(args.model, args.pull, before_pull=lambda: check_listen(settings.host, settings.port))
    settings = _with_embedded(settings, model)
    check_listen(settings.host, settings.port)
    if args.detach:  # a port taken now would be found by the server only after the health check saw another
        url = detach.local_url(settings.host, settings.port)
        return detach.start(_detached_arguments(args, model), url, args.json)
    configure_logging(args.log_level, settings.log_format)
    if settings.db_path().startswith(SHARED_DB_PREFIXES) and settings.coordination_url() is None:
        log.warning("no --redis: live events and cancellations reach only readers of this replica")
    migrate_apart(settings.db_path())
    options = uvicorn_options(settings, args.log_level)
    # Workers share their metrics through a directory made now (before any of them starts and reads it).
    with serving_metrics(settings.telemetry, args.workers):
        if args.workers > 1:
            # Worker processes import the app by name and read the settings from the environment.
            os.environ[SETTINGS_ENV] = settings.model_dump_json()
            uvicorn.run("ferryman.server.app:app_from_environment", factory=True, workers=args.workers, **options)
        else:
            uvicorn.run(create_app(services_from_settings(settings), settle=True), **options)
    return 0


def _with_embedded(settings: Settings, model: str | None) -> Settings:
    """The settings with their embedded providers.

    Without a configured provider: the default embedded model (``model``, else SmolLM2)
    and every pulled one. With configured providers and ``--model``: that model's
    embedded provider, listed first (the model clients default to).

    Raises:
        ConfigurationError: ``model`` is unknown, or a configured provider is named ``embedded`` too.
    """
    if not settings.providers:
        return settings.model_copy(update={"providers": embedded_providers(model)})
    if model is None:
        return settings
    if any(provider.provider_id == EMBEDDED_PROVIDER for provider in settings.providers):
        raise ConfigurationError(f"--model needs the provider id '{EMBEDDED_PROVIDER}', which the config file uses")
    return settings.model_copy(update={"providers": [embedded_providers(model)[0], *settings.providers]})


def uvicorn_options(settings: Settings, log_level: str) -> dict[str, Any]:
    """The options ``uvicorn.run`` gets (in every worker)."""
    return {
        "host": settings.host,
        "port": settings.port,
        "log_level": log_level,
        # One-line records, applied by uvicorn in every worker (its own loggers included).
        "log_config": logging_config(log_level, settings.log_format),
        "access_log": False,
        # No route of ferryman is a WebSocket: uvicorn's WebSocket protocol (and the library under it) stays unloaded.
        "ws": "none",
        # Bounded graceful shutdown: open turn streams must not keep the process alive;
        # turns still running are then cancelled and stored as failed.
        "timeout_graceful_shutdown": 5,
        # Idle connections outlive client pools' (httpx: 5 s): closing one at the moment a
        # client reuses it breaks that client's next request.
        "timeout_keep_alive": settings.keep_alive,
    }
