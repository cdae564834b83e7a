"""Optional dependencies (the package's extras): a missing one is named, not a traceback."""

from __future__ import annotations

import importlib

from ferryman.errors import MissingExtraError


def require(extra: str, module: str, purpose: str) -> None:
    """Import ``module`` (of the ``extra`` extra) that ``purpose`` needs.

    Raises:
        MissingExtraError: it is not installed, with the command that installs it.
    """
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{purpose} needs the '{extra}' extra ({module} is not installed): pip install -e '.[{extra}]'"
        ) from exc
