"""The web console's files: a page, its styles and its scripts (plain ES modules, no build step).

They are served by :mod:`ferryman.server.console_routes` from :data:`STATIC`, inside the installed package.
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"
"""The folder of the console's files."""
