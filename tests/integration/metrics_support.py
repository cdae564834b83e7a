"""Reading ``/metrics`` as Prometheus does: its text parsed by prometheus_client's parser, sample by sample.

The metrics of an in-process server live in the test process's registry, shared by every app it
ran: a test compares two scrapes (:func:`delta`) rather than reading absolute values.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, frozenset[tuple[str, str]]]
"""A sample: its name (``..._total``, ``..._count``, ``..._bucket``...) and its labels."""


def samples(text: str) -> dict[Key, float]:
    """Every sample of a scrape, by name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def key(name: str, **labels: str) -> Key:
    """The key of the sample ``name`` with exactly ``labels``."""
    return name, frozenset(labels.items())


def delta(before: dict[Key, float], after: dict[Key, float]) -> dict[Key, float]:
    """What changed between two scrapes: the samples whose value moved, by how much (new ones from 0)."""
    moved = {k: value - before.get(k, 0.0) for k, value in after.items()}
    return {k: change for k, change in moved.items() if change}
