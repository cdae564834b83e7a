"""``ferryman models list|register|unregister``: the models a running server routes to.

``models pull`` and ``models pulled`` need no server: the server's distribution adds them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ferryman.client import Client

from . import remote
from .remote import Output, UsageError


def add_arguments(models: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman models`` on a server to its parser (the server's CLI adds ``pull``)."""
    actions = models.add_subparsers(dest="models_command", required=True)
    listing = actions.add_parser("list", help="list the models")
    listing.set_defaults(handler=list_models)
    register = actions.add_parser("register", help="register a model (an alias of a provider's model)")
    register.add_argument("model_id", help="the id requests will name")
    register.add_argument("--provider-id", help="the provider serving it (default: the server's first)")
    register.add_argument("--provider-model-id", help="the provider's name for it (default: MODEL_ID)")
    register.add_argument("--model-type", choices=["llm", "embedding"], default="llm")
    register.add_argument("--metadata", help="a JSON object (embedding models: dimensions)")
    register.set_defaults(handler=register_model)
    unregister = actions.add_parser("unregister", help="unregister a model")
    unregister.add_argument("model_id")
    unregister.set_defaults(handler=unregister_model)
    for action in (listing, register, unregister):
        remote.add_flags(action)


def list_models(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the server's models."""
    models = list(client.models.list())
    if out.as_json:
        out.document(models)
        return 0
    rows = ((m.identifier, m.model_type, m.provider_id, m.provider_resource_id) for m in models)
    out.table(("model", "type", "provider", "provider's model"), rows)
    return 0


def register_model(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Register a model and print it."""
    model = client.models.register(
        model_id=args.model_id,
        provider_id=args.provider_id,
        provider_model_id=args.provider_model_id,
        model_type=args.model_type,
        metadata=_json_object(args.metadata) if args.metadata else {},
    )
    out.result(model, f"registered {model.identifier} → {model.provider_id}/{model.provider_resource_id}")
    return 0


def unregister_model(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Unregister a model."""
    client.models.unregister(args.model_id)
    out.result({"identifier": args.model_id, "deleted": True}, f"unregistered {args.model_id}")
    return 0


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--metadata is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise UsageError("--metadata must be a JSON object")
    return value
