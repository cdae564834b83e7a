"""``ferryman vector-stores create|list|add|search``: stores, their files' ingestion (with progress), searches."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from ferryman.api.vector_stores import VectorStore
from ferryman.client import Client

from . import ids, remote
from .files import upload
from .remote import Output, UsageError, when

POLL_SECONDS = 0.25
"""How often ``add`` asks how far the ingestion got."""


def add_arguments(stores: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman vector-stores`` to its parser."""
    actions = stores.add_subparsers(dest="vector_stores_command", required=True)
    create = actions.add_parser("create", help="create a vector store")
    create.add_argument("name")
    create.add_argument("--embedding-model", help="the embedding model (default: the server's)")
    create.set_defaults(handler=create_store)
    listing = actions.add_parser("list", help="list vector stores")
    listing.set_defaults(handler=list_stores)
    add = actions.add_parser("add", help="attach files (ids, or local paths uploaded first) and wait for ingestion")
    add.add_argument("store_id", help="the store's id, or a prefix of it")
    add.add_argument(
        "files", nargs="+", metavar="FILE", help="a file id (or a prefix of it), or the path of a local file to upload"
    )
    add.add_argument("--no-wait", action="store_true", help="return once attached, without waiting for ingestion")
    add.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for ingestion (default 600)")
    add.set_defaults(handler=add_files)
    search = actions.add_parser("search", help="search a vector store")
    search.add_argument("store_id", help="the store's id, or a prefix of it")
    search.add_argument("query")
    search.add_argument("--max-results", type=int, default=5)
    search.add_argument("--mode", choices=["vector", "keyword", "hybrid"], help="the ranker (default: the server's)")
    search.set_defaults(handler=search_store)
    for action in (create, listing, add, search):
        remote.add_flags(action)


def create_store(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Create a store and print it."""
    store = client.vector_stores.create(name=args.name, embedding_model=args.embedding_model)
    out.result(store, f"created vector store {store.id} ({store.name}, {store.embedding_model})")
    return 0


def list_stores(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the vector stores."""
    stores = list(client.vector_stores.list())
    if out.as_json:
        out.document(stores)
        return 0
    rows = (
        (s.id, s.name, s.status, f"{s.file_counts.completed}/{s.file_counts.total}", s.usage_bytes, when(s.created_at))
        for s in stores
    )
    out.table(("id", "name", "status", "files done", "bytes", "created"), rows)
    return 0


def add_files(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Attach files to a store (uploading local paths first), then follow the ingestion to its end."""
    store = client.vector_stores.retrieve(ids.vector_store(client, args.store_id))  # fails before any upload
    file_ids = _file_ids(client, args.files, out)
    client.vector_stores.file_batches.create(store.id, file_ids=file_ids)
    if not args.no_wait:
        store = _await_ingestion(client, store.id, args.timeout, out)
    else:
        store = client.vector_stores.retrieve(store.id)
    if out.as_json:
        out.document(store)
        return 0
    counts = store.file_counts
    out.line(f"{store.id}: {counts.completed} files ingested, {counts.failed} failed, {counts.in_progress} in progress")
    return 1 if counts.failed else 0


def search_store(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the chunks a search finds, best first."""
    page = client.vector_stores.search(
        ids.vector_store(client, args.store_id),
        query=args.query,
        max_num_results=args.max_results,
        search_mode=args.mode,
    )
    if out.as_json:
        out.document(page)
        return 0
    rows = (
        (f"{item.score:.3f}", item.filename, Text(" ".join(" ".join(c.text for c in item.content).split())))
        for item in page.data
    )
    out.table(("score", "file", "text"), rows, title=f"“{args.query}”")
    return 0


def _file_ids(client: Client, files: list[str], out: Output) -> list[str]:
    """The ids of ``files``: an existing local path is uploaded, anything else is taken as an id."""
    given = [ids.file(client, name) for name in files if not Path(name).is_file()]  # all found before any upload
    paths = [Path(name) for name in files if Path(name).is_file()]
    uploaded = iter(upload(client, paths, "assistants", out)) if paths else iter(())
    known = iter(given)
    return [next(uploaded).id if Path(name).is_file() else next(known) for name in files]


def _await_ingestion(client: Client, store_id: str, timeout: float, out: Output) -> VectorStore:
    """Poll the store's file counts until nothing is in progress, with a bar on stderr unless ``--json``.

    Raises:
        UsageError: the ingestion did not finish within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    columns = (TextColumn("ingesting"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=out.errors, disable=out.as_json) as progress:
        task = progress.add_task("ingesting", total=None)
        while True:
            store = client.vector_stores.retrieve(store_id)
            counts = store.file_counts
            progress.update(task, total=counts.total, completed=counts.total - counts.in_progress)
            if counts.in_progress == 0:
                return store
            if time.monotonic() >= deadline:
                raise UsageError(f"{store_id}: ingestion still running after {timeout:g}s ({counts.in_progress} left)")
            time.sleep(POLL_SECONDS)
