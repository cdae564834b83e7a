"""``ferryman audit list``: the creates, deletes and denials a server recorded, newest first."""

from __future__ import annotations

import argparse

from ferryman.api.audit import AUDIT_ACTIONS, AUDIT_OUTCOMES, AuditRecord
from ferryman.client import Client

from . import remote
from .remote import Output, UsageError, when

DEFAULT_SHOWN = 100


def add_arguments(audit: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman audit`` to its parser."""
    actions = audit.add_subparsers(dest="audit_command", required=True)
    listing = actions.add_parser("list", help="list audit records, newest first")
    listing.add_argument("--principal", help="only this principal's (key:NAME or sub:ID)")
    listing.add_argument("--action", choices=AUDIT_ACTIONS, help="only this action's")
    listing.add_argument("--resource", help="only this resource's (type::id)")
    listing.add_argument("--outcome", choices=AUDIT_OUTCOMES, help="only what was allowed, or only what was denied")
    listing.add_argument(
        "--since", help="only from this instant on: ISO 8601 (UTC unless it says otherwise) or epoch seconds"
    )
    listing.add_argument(
        "--limit", type=int, default=DEFAULT_SHOWN, help=f"at most this many (default {DEFAULT_SHOWN})"
    )
    listing.set_defaults(handler=list_audit)
    remote.add_flags(listing)


def list_audit(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the audit records the caller may read."""
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    records: list[AuditRecord] = []
    pages = client.audit.list(
        principal=args.principal, action=args.action, resource=args.resource, outcome=args.outcome,
        since=args.since, limit=min(args.limit, 100),
    )  # fmt: skip
    for record in pages:
        records.append(record)
        if len(records) >= args.limit:
            break
    if out.as_json:
        out.document(records)
        return 0
    if not records:
        out.note("no audit records")
        return 0
    rows = (
        (when(r.created_at), r.principal or "-", r.action, r.resource, _outcome(r), r.route or "", r.request_id or "")
        for r in records
    )
    out.table(("time", "principal", "action", "resource", "outcome", "route", "request id"), rows)
    return 0


def _outcome(record: AuditRecord) -> str:
    return record.outcome if record.status is None else f"{record.outcome} ({record.status})"
