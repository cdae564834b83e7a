"""``ferryman conversations list|fork``: the caller's conversations, and a new one holding another's items up to
one of them."""

from __future__ import annotations

import argparse

from ferryman.client import Client

from . import remote
from .remote import Output, UsageError, when

DEFAULT_SHOWN = 100
_PAGE = 100


def add_arguments(conversations: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman conversations`` to its parser."""
    actions = conversations.add_subparsers(dest="conversations_command", required=True)
    listing = actions.add_parser("list", help="list the conversations you may read, newest first")
    listing.add_argument("--oldest-first", action="store_true", help="oldest first instead")
    listing.add_argument(
        "--limit", type=int, default=DEFAULT_SHOWN, help=f"at most this many (default {DEFAULT_SHOWN})"
    )
    listing.set_defaults(handler=list_conversations)
    remote.add_flags(listing)
    fork = actions.add_parser(
        "fork", help="make a new conversation holding a conversation's items up to and including one; print its id"
    )
    fork.add_argument("conversation_id", help="the conversation's id (conv_…)")
    fork.add_argument("item_id", help="the last item the fork keeps")
    fork.add_argument(
        "--metadata", action="append", default=[], metavar="KEY=VALUE", help="the fork's metadata (repeatable; "
        "default: the original's)"
    )  # fmt: skip
    fork.set_defaults(handler=fork_conversation)
    remote.add_flags(fork)


def list_conversations(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the conversations the caller may read."""
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    order = "asc" if args.oldest_first else "desc"
    found = []
    for conversation in client.conversations.list(limit=min(args.limit, _PAGE), order=order):
        found.append(conversation)
        if len(found) >= args.limit:
            break
    if out.as_json:
        out.document(found)
    elif not found:
        out.note("no conversations")
    else:
        rows = ((c.id, when(c.created_at), _shown(c.metadata)) for c in found)
        out.table(("id", "created", "metadata"), rows)
    return 0


def _shown(metadata: dict[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in metadata.items())


def fork_conversation(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Fork a conversation at an item and print the new conversation's id."""
    metadata = _metadata(args.metadata) if args.metadata else None
    forked = client.conversations.fork(args.conversation_id, item_id=args.item_id, metadata=metadata)
    out.result({**forked.model_dump(mode="json"), "forked_from": args.conversation_id}, forked.id)
    return 0


def _metadata(pairs: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a mapping.

    Raises:
        UsageError: an argument has no ``=``.
    """
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--metadata takes KEY=VALUE, not '{pair}'")
        found[key] = value
    return found
