"""``ferryman keys create|list|revoke``: API keys, written straight to the server's database.

A key is printed once, at creation; only its hash is stored. The server reads
the store on every request, so a revocation holds on every replica at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from ferryman.auth.api_keys import key_record, new_key
from ferryman.config import StorageSettings, load_settings
from ferryman.errors import ConflictError
from ferryman.storage.base import Store
from ferryman.storage.domain.api_keys import ApiKeyRecord, ApiKeys
from ferryman.storage.select import store_for

from .arguments import check_paths, guarded

T = TypeVar("T")

_GRANTS = (("role", "roles"), ("team", "teams"), ("project", "projects"), ("namespace", "namespaces"))


def add_arguments(keys: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman keys`` to its parser."""
    keys.set_defaults(local=run)
    actions = keys.add_subparsers(dest="keys_command", required=True)
    create = actions.add_parser("create", help="make a key and print it (once)")
    create.add_argument("--name", required=True, help="the key's name: the principal it acts as")
    for flag, kind in _GRANTS:
        create.add_argument(f"--{flag}", action="append", default=[], dest=kind, help=f"grant a {flag} (repeatable)")
    listing = actions.add_parser("list", help="list keys (names, grants, times; never the key)")
    revoke = actions.add_parser("revoke", help="revoke a key by name")
    revoke.add_argument("name")
    for action in (create, listing, revoke):
        action.add_argument("--config", help="YAML config file (its storage section names the database)")
        action.add_argument("--db", help="the database, as for 'ferryman serve --db'")
        action.add_argument("--json", action="store_true", help="print one JSON document (for scripts)")


@guarded
def run(args: argparse.Namespace) -> int:
    """Run a ``keys`` subcommand against the configured database."""
    settings = load_settings(args.config)
    if args.db:
        storage = StorageSettings.model_validate(settings.storage.model_dump() | {"db": args.db})
        settings = settings.model_copy(update={"storage": storage})
    check_paths(settings)
    store = store_for(settings.db_path())
    command: dict[str, Callable[[ApiKeys, argparse.Namespace], Awaitable[int]]] = {
        "create": _create,
        "list": _list,
        "revoke": _revoke,
    }
    return asyncio.run(_with_store(store, lambda: command[args.keys_command](ApiKeys(store.kernel), args)))


async def _with_store(store: Store, work: Callable[[], Awaitable[T]]) -> T:
    await store.open()
    try:
        return await work()
    finally:
        await store.close()


async def _create(keys: ApiKeys, args: argparse.Namespace) -> int:
    key = new_key()
    try:
        record = key_record(args.name, key, {kind: getattr(args, kind) for _, kind in _GRANTS})
        await keys.create(record)
    except (ValueError, ConflictError) as exc:
        print(f"ferryman: {exc}", file=sys.stderr)
        return 2
    if args.json:
        _document({"name": record.name, "key": key, "grants": record.attributes})
    else:
        print(key)
    print(f"API key '{args.name}' created; it is shown only now: keep it.", file=sys.stderr)
    return 0


async def _list(keys: ApiKeys, args: argparse.Namespace) -> int:
    records = await keys.list()
    if args.json:
        _document([_listed(record) for record in records])
        return 0
    if not records:
        print("no API keys (make one with 'ferryman keys create --name NAME')", file=sys.stderr)
    for record in records:
        grants = " ".join(f"{kind}={','.join(values)}" for kind, values in sorted(record.attributes.items()))
        revoked = f"revoked {record.revoked_at.isoformat()}" if record.revoked_at else "active"
        print(f"{record.name}\tcreated {record.created_at.isoformat()}\t{revoked}\t{grants}".rstrip())
    return 0


async def _revoke(keys: ApiKeys, args: argparse.Namespace) -> int:
    if not await keys.revoke(args.name, datetime.now(UTC)):
        print(f"ferryman: no API key named '{args.name}'", file=sys.stderr)
        return 1
    if args.json:
        _document({"name": args.name, "revoked": True})
    else:
        print(f"API key '{args.name}' revoked", file=sys.stderr)
    return 0


def _listed(record: ApiKeyRecord) -> dict[str, Any]:
    """What ``keys list --json`` tells of a key: never the key, nor its hash."""
    return {
        "name": record.name,
        "grants": record.attributes,
        "created_at": record.created_at.isoformat(),
        "revoked_at": record.revoked_at.isoformat() if record.revoked_at else None,
    }


def _document(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False), flush=True)
