"""The benchmark's output: a table on stdout and a JSON file.

This is the only module that writes to stdout (the bench is a CLI; everything
else returns data).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from .stats import Figure

GROUP_TITLES = {
    "headline": "Headline",
    "throughput.direct": "Stub alone (same chat completion, non-streaming)",
    "throughput.turn": "One-step turn (non-streaming)",
    "throughput.tool_turn": "Turn with one server-side tool call (two inference steps)",
    "tail": "Tail latency at the highest concurrency",
    "streaming": "Streaming turn (c=1)",
    "client_tool": "Client-tool round trip (c=1)",
    "history": "Growth with history",
    "listing": "Listing",
    "memory": "Server memory",
    "knowledge": "Knowledge: chunk index ingestion and search (in process, no server)",
}


def _number(value: float) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _spread(fig: Figure) -> str:
    if len(fig.runs) < 2:
        return f"(n={len(fig.runs)})"
    return f"[{_number(fig.min)} .. {_number(fig.max)}] n={len(fig.runs)}"


def _errors(fig: Figure) -> str:
    if not fig.errors:
        return "0"
    kinds = ",".join(f"{kind}:{count}" for kind, count in sorted(fig.error_kinds.items()))
    return f"{fig.errors} ({kinds})" if kinds else str(fig.errors)


def _rows(figures: Iterable[Figure]) -> list[tuple[str, str, str, str, str]]:
    return [(f.label, _number(f.value), f.unit, _spread(f), _errors(f)) for f in figures]


def write_table(figures: list[Figure], meta: dict[str, Any], out: TextIO | None = None) -> None:
    """Write the figures as a table grouped by section, headline first.

    Args:
        figures: Everything measured.
        meta: Run description (mode, cores, python...), printed as the header.
        out: Stream to write to (stdout by default).
    """
    stream = out or sys.stdout
    stream.write(
        f"\nferryman bench -- mode={meta['mode']} cores={meta['cores']} python={meta['python']} "
        f"stub={meta['stub']} db={meta['db_kind']}\n"
        "value = median of runs; spread = [min .. max] of runs; errors = failed operations while measuring\n"
    )
    order = list(GROUP_TITLES)
    groups = sorted({f.group for f in figures}, key=lambda g: order.index(g) if g in order else len(order))
    header = ("figure", "value", "unit", "spread", "errors")
    for group in groups:
        rows = _rows(f for f in figures if f.group == group)
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        stream.write(f"\n== {GROUP_TITLES.get(group, group)}\n")
        for row in [header, *rows]:
            cells = [row[0].ljust(widths[0]), row[1].rjust(widths[1]), row[2].ljust(widths[2]),
                     row[3].ljust(widths[3]), row[4].rjust(widths[4])]  # fmt: skip
            stream.write("  ".join(cells).rstrip() + "\n")
    stream.flush()


def write_profile(summary: dict[str, Any], out: TextIO | None = None) -> None:
    """Write the rankings of a py-spy profile summary (see :func:`bench.profiling.summarise`)."""
    stream = out or sys.stdout
    stream.write(f"\n== Server profile under load ({summary['samples']} samples; % of non-idle samples)\n")
    titles = {
        "threads": "by thread",
        "self_by_package": "self time by package",
        "self_by_function": "self time by function",
        "inclusive_ferryman": "inclusive time of ferryman functions",
        "inclusive_libraries": "inclusive time of library functions (openai, pydantic, httpx, h11...)",
    }
    for key, title in titles.items():
        stream.write(f"-- {title}\n")
        for name, percent in summary.get(key, []):
            stream.write(f"  {percent:5.1f}%  {name}\n")
    stream.flush()


def write_json(path: Path, figures: list[Figure], meta: dict[str, Any], profile: dict[str, Any] | None) -> None:
    """Write every figure, with its unit and runs, and the run's description to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "meta": meta,
        "figures": {f.name: f.as_json() for f in figures},
        "headline": [f.name for f in figures if f.headline],
        "profile": profile,
    }
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")


def note(message: str) -> None:
    """A progress line on stderr (keeps stdout for the table)."""
    sys.stderr.write(f"[bench] {message}\n")
    sys.stderr.flush()
