"""``ferryman files upload|list``: uploads with a progress bar, and the files a server holds."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from ferryman.api.files import FileObject
from ferryman.client import Client

from . import remote
from .remote import Output, UsageError, when


def add_arguments(files: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``ferryman files`` to its parser."""
    actions = files.add_subparsers(dest="files_command", required=True)
    upload = actions.add_parser("upload", help="upload files (a progress bar per file)")
    upload.add_argument("paths", nargs="+", metavar="PATH")
    upload.add_argument("--purpose", default="assistants", help="the files' purpose (default assistants)")
    upload.set_defaults(handler=upload_files)
    listing = actions.add_parser("list", help="list files, newest first")
    listing.add_argument("--purpose", help="only files of this purpose")
    listing.add_argument("--limit", type=int, help="at most this many")
    listing.set_defaults(handler=list_files)
    for action in (upload, listing):
        remote.add_flags(action)


def upload_files(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Upload each path, showing its bytes going out, and print what the server stored."""
    paths = [Path(path) for path in args.paths]
    uploaded = upload(client, paths, args.purpose, out)
    if out.as_json:
        out.document(uploaded)
    else:
        _table(out, uploaded)
    return 0


def upload(client: Client, paths: list[Path], purpose: str, out: Output) -> list[FileObject]:
    """Upload ``paths`` one by one (a bar over their bytes on stderr, unless ``--json``); the files stored.

    The client sends each file's bytes as one body (so that a retry can send them again): the bar
    moves as each file is stored.

    Raises:
        UsageError: a path is not a readable file (checked for all before any upload).
    """
    for path in paths:
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
    uploaded = []
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, console=out.errors, disable=out.as_json) as progress:
        task = progress.add_task("uploading", total=sum(path.stat().st_size for path in paths))
        for path in paths:
            progress.update(task, description=f"uploading {path.name}")
            uploaded.append(client.files.create((path.name, path.read_bytes()), purpose=purpose))
            progress.advance(task, path.stat().st_size)
        progress.update(task, description=f"uploaded {len(paths)} file{'s' if len(paths) > 1 else ''}")
    return uploaded


def list_files(client: Client, args: argparse.Namespace, out: Output) -> int:
    """Print the server's files."""
    files: list[FileObject] = []
    for file in client.files.list(purpose=args.purpose, limit=args.limit):
        if args.limit is not None and len(files) >= args.limit:
            break
        files.append(file)
    if out.as_json:
        out.document(files)
    else:
        _table(out, files)
    return 0


def _table(out: Output, files: list[FileObject]) -> None:
    rows = ((f.id, f.filename, f.bytes, f.purpose, f.status, when(f.created_at)) for f in files)
    out.table(("id", "name", "bytes", "purpose", "status", "created"), rows)
