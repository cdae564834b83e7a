"""``ferryman webhooks deliveries``: the events a server posted (or still posts) to runs' webhooks.

``ferryman webhooks secret`` (the secret receivers verify signatures with) needs the server's
files, not a running server: the server's distribution adds it.
"""

from __future__ import annotations

import argparse

from ferryman.api.webhooks import WebhookDelivery
from ferryman.client import Client

from . import remote
from .remote import Output, UsageError, when

DEFAULT_SHOWN = 100


def add_arguments(webhooks: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman webhooks`` on a server to its parser (the server's CLI adds ``secret``)."""
    actions = webhooks.add_subparsers(dest="webhooks_command", required=True)
    listing = actions.add_parser("deliveries", help="list webhook deliveries and their attempts, newest first")
    listing.add_argument("--run", help="only those of this turn or response (its id)")
    listing.add_argument(
        "--limit", type=int, default=DEFAULT_SHOWN, help=f"at most this many (default {DEFAULT_SHOWN})"
    )
    listing.set_defaults(handler=list_deliveries)
    remote.add_flags(listing)


def list_deliveries(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the webhook deliveries the caller may read."""
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    deliveries: list[WebhookDelivery] = []
    for delivery in client.webhook_deliveries.list(run_id=args.run, limit=min(args.limit, 100)):
        deliveries.append(delivery)
        if len(deliveries) >= args.limit:
            break
    if out.as_json:
        out.document(deliveries)
        return 0
    if not deliveries:
        out.note("no webhook deliveries")
        return 0
    rows = (
        (when(d.created_at), d.id, d.type, d.run_id, d.status, len(d.attempts), _last(d), d.url) for d in deliveries
    )
    out.table(("time", "delivery", "event", "run", "status", "attempts", "last attempt", "url"), rows)
    return 0


def _last(delivery: WebhookDelivery) -> str:
    """The last attempt's outcome: its status code, or why it had none."""
    if not delivery.attempts:
        return "-"
    last = delivery.attempts[-1]
    if last.error is None:
        return str(last.status_code)
    return last.error if last.status_code is None else f"HTTP {last.status_code}"
