"""``ferryman usage``: the tokens and turns a server recorded in a time range, per agent, principal or model."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from ferryman.client import Client

from . import remote
from .remote import Output

GROUPS = ("agent", "principal", "model")
NOBODY = {"agent": "(no agent: responses)", "principal": "(no principal: auth off)", "model": "(no model)"}
"""How a row without a key is shown to people, by what the usage is summed by."""


def add_arguments(usage: argparse.ArgumentParser) -> None:
    """Add the arguments of ``ferryman usage`` to its parser."""
    usage.add_argument("--by", choices=GROUPS, default="agent", help="what to sum the usage by (default: agent)")
    usage.add_argument(
        "--since", help="the range's start: ISO 8601 (UTC unless it says otherwise) or epoch seconds (default: today)"
    )
    usage.add_argument("--until", help="the range's end, excluded, written like --since (default: now)")
    usage.set_defaults(handler=show_usage)
    remote.add_flags(usage)


def show_usage(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the usage of the range, the largest total first."""
    summary = client.usage.get(group_by=args.by, since=args.since, until=args.until)
    if out.as_json:
        out.document(summary)
        return 0
    span = f"{_when(summary.since)} to {_when(summary.until)}"
    if not summary.data:
        out.note(f"no usage recorded from {span}")
        return 0
    rows = (
        (row.key if row.key is not None else NOBODY[args.by], row.input_tokens, row.output_tokens, row.total_tokens,
         row.turns)
        for row in summary.data
    )  # fmt: skip
    columns = (summary.group_by, "input tokens", "output tokens", "total tokens", "turns")
    out.table(columns, rows, title=f"token usage by {summary.group_by}, {span}")
    return 0


def _when(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
