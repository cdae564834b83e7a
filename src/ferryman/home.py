"""Where ferryman keeps its own files by default: ``$FERRYMAN_HOME``, else ``~/.ferryman``."""

from __future__ import annotations

import os
from pathlib import Path


def ferryman_home() -> Path:
    """``$FERRYMAN_HOME``, else ``~/.ferryman`` (read at each call: tests and tools set it late)."""
    return Path(os.environ.get("FERRYMAN_HOME") or Path.home() / ".ferryman")
