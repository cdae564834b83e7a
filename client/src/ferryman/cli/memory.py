"""``ferryman memory list|show|set|delete``: an agent's memory blocks on a running server."""

from __future__ import annotations

import argparse
import sys

from ferryman.client import Client

from . import remote
from .remote import Output, UsageError, when

PREVIEW_CHARS = 60


def add_arguments(memory: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman memory`` to its parser."""
    actions = memory.add_subparsers(dest="memory_command", required=True)
    listing = actions.add_parser("list", help="list an agent's memory blocks")
    listing.add_argument("agent_id")
    listing.set_defaults(handler=list_blocks)
    show = actions.add_parser("show", help="show a memory block (with --versions, its versions kept)")
    show.add_argument("agent_id")
    show.add_argument("label")
    show.add_argument("--versions", action="store_true", help="list the block's versions, newest first")
    show.set_defaults(handler=show_block)
    put = actions.add_parser("set", help="create a memory block or write a new version of it")
    put.add_argument("agent_id")
    put.add_argument("label")
    put.add_argument("value", help="the block's new text ('-': read it from stdin)")
    put.add_argument("--description", help="what the block is for")
    put.add_argument("--version", type=int, help="write only over this version (else: conflict, exit status 1)")
    put.set_defaults(handler=set_block)
    delete = actions.add_parser("delete", help="delete a memory block with its versions")
    delete.add_argument("agent_id")
    delete.add_argument("label")
    delete.set_defaults(handler=delete_block)
    for parser in (listing, show, put, delete):
        remote.add_flags(parser)


def list_blocks(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print an agent's memory blocks."""
    blocks = client.memory.list(args.agent_id)
    if out.as_json:
        out.document(blocks)
    elif not blocks:
        out.note(f"agent {args.agent_id} has no memory blocks")
    else:
        rows = ((b.label, b.version, when(b.updated_at), _preview(b.value)) for b in blocks)
        out.table(("label", "version", "updated", "value"), rows)
    return 0


def show_block(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print one block, or its versions."""
    if args.versions:
        versions = client.memory.versions(args.agent_id, args.label)
        if out.as_json:
            out.document(versions)
        else:
            out.table(("version", "written", "value"), ((v.version, when(v.updated_at), v.value) for v in versions))
        return 0
    block = client.memory.get(args.agent_id, args.label)
    if out.as_json:
        out.document(block)
    else:
        out.fields(
            [("label", block.label), ("version", block.version), ("description", block.description or ""),
             ("updated", when(block.updated_at))]
        )  # fmt: skip
        out.line(block.value)
    return 0


def set_block(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Write a block."""
    value = sys.stdin.read() if args.value == "-" else args.value
    if args.version is not None and args.version < 1:
        raise UsageError("--version must be at least 1")
    block = client.memory.set(args.agent_id, args.label, value, description=args.description, version=args.version)
    out.result(block, f"memory block {block.label} is at version {block.version}")
    return 0


def delete_block(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Delete a block."""
    client.memory.delete(args.agent_id, args.label)
    out.result({"deleted": args.label}, f"deleted memory block {args.label}")
    return 0


def _preview(value: str) -> str:
    line = " ".join(value.split())
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"
