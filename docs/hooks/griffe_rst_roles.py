"""A griffe extension for the SDK reference: Sphinx roles in docstrings read as code.

The docstrings of ``ferryman.client`` are Google style with Sphinx cross-reference roles
(``:class:`~ferryman.client.Agent```), which Markdown would show as they are. This rewrites each
role to a code span (its last dotted part when the target starts with ``~``), in the docs only:
the source is left alone. Loaded by mkdocstrings (``extensions:`` in ``mkdocs.yml``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|mod|func|meth|attr|data|exc|obj|const):`(~?)([^`]+)`")


def plain_roles(text: str) -> str:
    """``text`` with every Sphinx role as a Markdown code span."""

    def code(match: re.Match[str]) -> str:
        short, target = match.group(1), match.group(2).lstrip(".")
        return f"`{target.rsplit('.', 1)[-1] if short else target}`"

    return _ROLE.sub(code, text)


class RstRoles(griffe.Extension):
    """Rewrites the roles of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite one object's docstring."""
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
