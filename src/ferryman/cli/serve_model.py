"""``ferryman serve --model REPO/FILE``: the model to serve, pulled first from the Hugging Face Hub when missing.

``--model`` names a pulled model, a ``.gguf`` file, or a file of a Hub repository
(``OWNER/NAME/FILE.gguf`` or ``hf://OWNER/NAME/FILE``). A Hub file pulled before is
served under the name it was pulled as; one not pulled yet is downloaded (a progress bar
on stderr) after the user agrees on a terminal, or at once with ``--pull``. Without a
terminal and without ``--pull`` nothing is downloaded: one line says to pass ``--pull``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from ferryman.errors import ConfigurationError
from ferryman.inference.pulled import PulledModels

HF_SCHEME = "hf://"


def hub_file(model: str, pulled: PulledModels) -> tuple[str, str] | None:
    """The repository and file ``model`` names on the Hub, or None when it names a pulled model or a local file."""
    if model.startswith(HF_SCHEME):
        parts = model.removeprefix(HF_SCHEME).split("/")
        if len(parts) < 3 or not all(parts):
            raise ConfigurationError(f"--model expects {HF_SCHEME}OWNER/NAME/FILE, got {model}")
        return "/".join(parts[:2]), "/".join(parts[2:])
    parts = model.split("/")
    if (
        len(parts) < 3
        or not all(parts)
        or not model.endswith(".gguf")
        or model.startswith((".", "~"))
        or Path(model).exists()
        or pulled.get(model) is not None
    ):
        return None
    return "/".join(parts[:2]), "/".join(parts[2:])


def interactive() -> bool:
    """Whether a person can be asked: stdin and stderr are terminals."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def _ask(question: str) -> bool:
    """Ask on stderr; yes unless the answer starts with n (end of input is no)."""
    print(question, end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return bool(answer) and not answer.strip().lower().startswith("n")


def model_to_serve(
    model: str | None,
    allow_pull: bool,
    pulled: PulledModels | None = None,
    before_pull: Callable[[], None] | None = None,
) -> str | None:
    """The name ``ferryman serve`` gives the embedded provider: ``model``, or the pulled model it names on the Hub.

    Args:
        model: ``--model`` as given (None: the default model).
        allow_pull: ``--pull``: download a missing Hub file without asking.
        pulled: The pulled models (default: ``$FERRYMAN_HOME/models``).
        before_pull: Called before a download starts (a last check of what would make it useless).

    Raises:
        ConfigurationError: the file is not pulled and may not be (no terminal and no ``--pull``, or the user
            said no), or the pull failed (the endpoint it tried and the settings that change it named).
    """
    pulled = pulled or PulledModels()
    source = None if model is None else hub_file(model, pulled)
    if source is None:
        return model
    repo_id, filename = source
    known = next((m for m in pulled.all() if (m.repo_id, m.filename) == (repo_id, filename)), None)
    if known is not None:
        return known.name
    from ferryman.inference.hub_pull import PullRequest, hub_endpoint, pull  # noqa: PLC0415 - huggingface_hub: slow

    where = hub_endpoint()
    if not allow_pull:
        if not interactive():
            raise ConfigurationError(
                f"{repo_id}/{filename} is not pulled: pass --pull to download it from {where} "
                f"(or run 'ferryman models pull {repo_id} {filename}' first)"
            )
        if not _ask(f"{repo_id}/{filename} is not pulled: download it from {where} into {pulled.directory}? [Y/n] "):
            raise ConfigurationError(f"not pulling {repo_id}/{filename}: nothing was started")
    if before_pull is not None:
        before_pull()
    print(f"pulling {repo_id}/{filename} from {where}", file=sys.stderr, flush=True)
    pulled_model = pull(PullRequest(repo_id, filename), pulled)
    print(f"pulled {pulled_model.name} into {pulled_model.file(pulled.directory)}", file=sys.stderr, flush=True)
    return pulled_model.name
