"""``ferryman responses``: ``list`` stored responses, newest first, all or those made in one conversation;
``compact`` a conversation into a ``compaction`` item (``POST /v1/responses/compact``)."""

from __future__ import annotations

import argparse

from ferryman.api.responses import CompactionItem, InputText, Item, ListedResponse, MessageItem, OutputText
from ferryman.client import Client

from . import remote
from .remote import Output, UsageError, when

DEFAULT_SHOWN = 100
_PAGE = 100
_TEXT_SHOWN = 60


def add_arguments(responses: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman responses`` to its parser."""
    actions = responses.add_subparsers(dest="responses_command", required=True)
    listing = actions.add_parser("list", help="list the stored responses you may read, newest first")
    listing.add_argument("--conversation", dest="conversation_id", help="only those made in this conversation")
    listing.add_argument("--oldest-first", action="store_true", help="oldest first instead")
    listing.add_argument(
        "--limit", type=int, default=DEFAULT_SHOWN, help=f"at most this many (default {DEFAULT_SHOWN})"
    )
    listing.set_defaults(handler=list_responses)
    remote.add_flags(listing)
    compact = actions.add_parser(
        "compact", help="summarize a conversation into a compaction item to give back in a later input"
    )
    compact.add_argument("--previous-response", metavar="ID", help="the stored response whose chain is compacted")
    compact.add_argument("--input", metavar="TEXT", help="a user message after that chain (or alone)")
    compact.add_argument("--model", help="the model that summarizes (default: the previous response's)")
    compact.set_defaults(handler=compact_conversation)
    remote.add_flags(compact)


def list_responses(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the stored responses the caller may read (of one conversation, with ``--conversation``)."""
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    order = "asc" if args.oldest_first else "desc"
    pages = client.responses.list(limit=min(args.limit, _PAGE), order=order, conversation_id=args.conversation_id)
    found: list[ListedResponse] = []
    for response in pages:
        found.append(response)
        if len(found) >= args.limit:
            break
    if out.as_json:
        out.document(found)
    elif not found:
        out.note("no responses")
    else:
        rows = ((r.id, when(r.created_at), r.status, r.model, _text(r)) for r in found)
        out.table(("id", "created", "status", "model", "output"), rows)
    return 0


def compact_conversation(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print what ``POST /v1/responses/compact`` made: the user messages and the sealed ``compaction`` item."""
    if args.previous_response is None and not args.input:
        raise UsageError("give --previous-response, --input, or both")
    model = args.model or (client.responses.retrieve(args.previous_response).model if args.previous_response else None)
    if model is None:
        raise UsageError("--model is needed without --previous-response")
    compacted = client.responses.compact(model=model, input=args.input, previous_response_id=args.previous_response)
    if out.as_json:  # the output is what a later request gives as its input
        out.document(compacted)
        return 0
    usage = compacted.usage
    out.fields((("id", compacted.id), ("tokens", f"{usage.input_tokens} in, {usage.output_tokens} out")))
    out.table(("item", "type", "content"), ((item.id, item.type, _item_text(item)) for item in compacted.output))
    return 0


def _item_text(item: Item) -> str:
    """What a table shows of an item of a compacted conversation."""
    if isinstance(item, CompactionItem):
        return f"sealed summary ({len(item.encrypted_content)} characters)"
    return _shortened(_texts(item)) if isinstance(item, MessageItem) else ""


def _text(response: ListedResponse) -> str:
    """The start of the response's answer, for a table."""
    return _shortened([text for item in response.output if isinstance(item, MessageItem) for text in _texts(item)])


def _texts(item: MessageItem) -> list[str]:
    content = item.content
    return [content] if isinstance(content, str) else [p.text for p in content if isinstance(p, OutputText | InputText)]


def _shortened(parts: list[str]) -> str:
    text = " ".join(parts).replace("\n", " ")
    return text if len(text) <= _TEXT_SHOWN else text[: _TEXT_SHOWN - 1] + "…"
