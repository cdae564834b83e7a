"""Imports run one way: no module imports from a layer above its own (issue #22, item 6).

The layers, bottom to top, are :data:`LAYERS`; ``client`` imports only ``api``.
Besides upward imports, a few downward edges are refused because the upper
package should own a small port instead (:data:`REFUSED`). What still breaks
the rule is listed in :data:`KNOWN`, to be emptied: the test fails on a break
not listed there, and on a listed break that no longer exists, so the list
only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT / "src" / "ferryman", ROOT / "client" / "src" / "ferryman")

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({
        "api", "errors", "config", "logs", "home", "heap", "extras", "redis_url", "safe_fetch", "metrics", "blas",
        "trace_settings", "telemetry_settings", "audit_settings", "trace_headers", "ids", "withheld",
        "schedule_settings", "context_settings", "webhook_settings", "console", "periodic", "turn_records",
        "auth_settings", "quota_settings", "safety_settings", "sandbox_settings", "websearch_settings",
        "embedded_settings", "file_settings",
    }),
    frozenset({"storage", "inference", "sandbox", "coordination", "testing"}),
    frozenset({"knowledge", "tools", "safety", "auth", "webhooks"}),
    frozenset({"engine"}),
    frozenset({"services"}),
    frozenset({"server"}),
    frozenset({"cli", "client"}),
)  # fmt: skip
CLIENT_MAY_IMPORT = frozenset({"api", "client"})
REFUSED = frozenset({("auth", "coordination"), ("safety", "storage"), ("engine", "storage")})
"""Downward edges the issue names as breaks: the importer should own the port it needs."""

KNOWN: frozenset[tuple[str, str]] = frozenset()
"""The breaks that remain, as (importing package, imported package)."""


def _layer(package: str) -> int:
    for number, members in enumerate(LAYERS):
        if package in members:
            return number
    raise AssertionError(f"ferryman.{package} has no layer: add it to LAYERS")


def _module_name(path: Path, source: Path) -> str:
    parts = list(path.relative_to(source.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, module: str) -> Iterator[str]:
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                yield ".".join([*base, *([node.module] if node.module else [])])
            elif node.module:
                yield node.module


def _edges() -> dict[tuple[str, str], set[str]]:
    edges: dict[tuple[str, str], set[str]] = {}
    for source in SOURCES:
        for path in source.rglob("*.py"):
            module = _module_name(path, source)
            importer = module.split(".")[1]
            for target in _imported(path, module):
                parts = target.split(".")
                if parts[0] == "ferryman" and len(parts) > 1 and parts[1] != importer:
                    edges.setdefault((importer, parts[1]), set()).add(module)
    return edges


def _breaks(edges: dict[tuple[str, str], set[str]]) -> dict[tuple[str, str], set[str]]:
    found = {}
    for (importer, imported), modules in edges.items():
        if importer == "client":
            broken = imported not in CLIENT_MAY_IMPORT
        else:
            broken = _layer(imported) > _layer(importer) or (importer, imported) in REFUSED
        if broken:
            found[(importer, imported)] = modules
    return found


def test_no_import_runs_up_a_layer_beyond_the_known_ones() -> None:
    breaks = _breaks(_edges())
    new = {edge: sorted(modules) for edge, modules in breaks.items() if edge not in KNOWN}
    assert not new, f"imports running up a layer (or refused): {new}"


def test_the_known_breaks_all_still_exist() -> None:
    gone = KNOWN - set(_breaks(_edges()))
    assert not gone, f"fixed: remove {sorted(gone)} from KNOWN"


def test_every_package_has_a_layer() -> None:
    for importer, imported in _edges():
        if importer != "client":
            _layer(importer)
            _layer(imported)
