"""``ferryman models pull|pulled``: download a GGUF from the Hugging Face Hub, list what was pulled.

Both work without a server: they write and read ``$FERRYMAN_HOME/models``, which
``ferryman serve`` reads at start-up (``ferryman serve --model NAME`` makes one
the default model).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from ferryman.inference.pulled import PulledModels

from .arguments import guarded
from .remote import Output


def add_pull(fetch: argparse.ArgumentParser) -> None:
    """Add the arguments of ``ferryman models pull`` to its parser."""
    fetch.add_argument("source", help="the repository (OWNER/NAME), or hf://OWNER/NAME/FILE")
    fetch.add_argument("filename", nargs="?", help="the GGUF file in the repository")
    fetch.add_argument("--revision", help="branch, tag or commit (default: main)")
    fetch.add_argument("--name", help="the model id to serve it under (default: the file name without .gguf)")
    fetch.add_argument("--json", action="store_true", help="print one JSON document (for scripts)")
    fetch.set_defaults(local=pull_model)


def add_pulled(listing: argparse.ArgumentParser) -> None:
    """Add the arguments of ``ferryman models pulled`` to its parser."""
    listing.add_argument("--json", action="store_true", help="print one JSON document (for scripts)")
    listing.set_defaults(local=list_pulled)


@guarded
def pull_model(args: argparse.Namespace) -> int:
    """Download the file, verify it and record it; print how to serve it."""
    from ferryman.inference.hub_pull import PullRequest, parse_source, pull  # noqa: PLC0415 - huggingface_hub: slow

    repo_id, filename = parse_source(args.source, args.filename)
    model = pull(PullRequest(repo_id, filename, args.revision, args.name))
    out = Output(args.json)
    if out.as_json:
        out.document(asdict(model))
        return 0
    path = model.file(PulledModels().directory)
    out.line(f"pulled {model.name} ({_size(model.size)}) into {path}")
    out.line(f"serve it as the default model: ferryman serve --model {model.name}")
    return 0


@guarded
def list_pulled(args: argparse.Namespace) -> int:
    """Print the pulled models."""
    models = PulledModels()
    pulled = models.all()
    out = Output(args.json)
    if out.as_json:
        out.document([asdict(model) for model in pulled])
        return 0
    if not pulled:
        out.note(f"no model pulled into {models.directory} yet: ferryman models pull REPO FILE")
        return 0
    rows = (
        (m.name, f"{m.repo_id}/{m.filename}", _size(m.size), m.commit[:12], m.file(models.directory)) for m in pulled
    )
    out.table(("model", "from", "size", "commit", "file"), rows)
    return 0


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
