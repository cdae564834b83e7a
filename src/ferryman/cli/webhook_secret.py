"""``ferryman webhooks secret``: the secret the server signs webhook events with, for receivers to verify them.

It is ``webhooks.secret`` from the config when set, else the one the server generated into its store at its
first start (read from the database the config or ``--db`` names, as ``ferryman keys`` does). It never
generates one: a secret no server uses would verify nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from ferryman.config import StorageSettings, load_settings
from ferryman.storage.select import store_for
from ferryman.webhooks.signing import checked_secret, stored_secret

from .arguments import check_paths, guarded


def add_secret(secret: argparse.ArgumentParser) -> None:
    """Add the arguments of ``ferryman webhooks secret`` to its parser."""
    secret.add_argument("--config", help="YAML config file (its webhooks.secret, if set, is the secret)")
    secret.add_argument("--db", help="the database, as for 'ferryman serve --db'")
    secret.add_argument("--json", action="store_true", help="print one JSON document (for scripts)")
    secret.set_defaults(local=show_secret)


@guarded
def show_secret(args: argparse.Namespace) -> int:
    """Print the webhook signing secret (and where it comes from, with ``--json``); 1 when there is none yet."""
    settings = load_settings(args.config)
    if args.db:
        storage = StorageSettings.model_validate(settings.storage.model_dump() | {"db": args.db})
        settings = settings.model_copy(update={"storage": storage})
    if settings.webhooks.secret is not None:
        secret: str | None = checked_secret(settings.webhooks.secret.get_secret_value(), "webhooks.secret")
        source = "webhooks.secret"
    else:
        check_paths(settings)
        secret, source = asyncio.run(_stored(settings.db_path())), "store"
    if secret is None:
        print("ferryman: no webhook secret yet: the server makes one at its first start", file=sys.stderr)
        return 1
    print(json.dumps({"secret": secret, "source": source}) if args.json else secret)
    return 0


async def _stored(db: str) -> str | None:
    store = store_for(db)
    await store.open()
    try:
        return await stored_secret(store.kernel)
    finally:
        await store.close()
