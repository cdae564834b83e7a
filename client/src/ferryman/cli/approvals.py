"""``ferryman approvals list|approve|deny``: the server tool calls waiting for a person, and decisions on them."""

from __future__ import annotations

import argparse
import json

from ferryman.api.approvals import Approval
from ferryman.client import Client

from . import remote
from .remote import Output, UsageError, when

DEFAULT_SHOWN = 100
_PAGE = 100
_ARGUMENTS_SHOWN = 80


def add_arguments(approvals: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman approvals`` to its parser."""
    actions = approvals.add_subparsers(dest="approvals_command", required=True)
    listing = actions.add_parser("list", help="list the calls waiting for approval, newest first")
    listing.add_argument("--agent", dest="agent_id", help="only this agent's turns' calls")
    listing.add_argument("--source", choices=("turn", "response"), help="only turns' or only responses' calls")
    listing.add_argument(
        "--limit", type=int, default=DEFAULT_SHOWN, help=f"at most this many (default {DEFAULT_SHOWN})"
    )
    listing.set_defaults(handler=list_approvals)
    remote.add_flags(listing)
    for verdict, says in (("approve", "run the call and continue"), ("deny", "refuse the call and continue")):
        decide = actions.add_parser(verdict, help=f"{says} its turn or response")
        decide.add_argument("approval_id", help="the approval's id (from `ferryman approvals list`)")
        decide.add_argument("--reason", help="why (a denial's reason is what the model is told)")
        decide.set_defaults(handler=decide_approval, approve=verdict == "approve")
        remote.add_flags(decide)


def list_approvals(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the calls waiting for approval that the caller may read."""
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    found: list[Approval] = []
    for approval in client.approvals.list(agent_id=args.agent_id, source=args.source, limit=min(args.limit, _PAGE)):
        found.append(approval)
        if len(found) >= args.limit:
            break
    if out.as_json:
        out.document(found)
        return 0
    if not found:
        out.note("no calls waiting for approval")
        return 0
    rows = ((a.id, when(a.created_at), a.tool_name, _arguments(a), _held_by(a)) for a in found)
    out.table(("id", "waiting since", "tool", "arguments", "held by"), rows)
    return 0


def decide_approval(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Approve or deny one call; the server continues its turn or response."""
    decide = client.approvals.approve if args.approve else client.approvals.deny
    approval = decide(args.approval_id, reason=args.reason)
    then = f"; response {approval.next_response_id} continues it" if approval.next_response_id else ""
    out.result(approval, f"{approval.status} {approval.tool_name} ({approval.id}) of {_held_by(approval)}{then}")
    return 0


def _arguments(approval: Approval) -> str:
    text = approval.arguments if isinstance(approval.arguments, str) else json.dumps(approval.arguments)
    return text if len(text) <= _ARGUMENTS_SHOWN else text[: _ARGUMENTS_SHOWN - 1] + "…"


def _held_by(approval: Approval) -> str:
    if approval.turn_id is not None:
        return f"agent {approval.agent_id} turn {approval.turn_id}"
    label = f" ({approval.server_label})" if approval.server_label else ""
    return f"response {approval.response_id}{label}"
