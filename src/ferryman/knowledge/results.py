"""What a search asks and finds: the types every caller of retrieval shares (both APIs, tools, the engine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

SearchMode = Literal["hybrid", "vector", "keyword"]


@dataclass(frozen=True)
class RankingOptions:
    """How results are ranked and cut.

    ``ranker`` is OpenAI's field: ``auto`` and ``default-2024-11-15`` mean hybrid;
    ``hybrid``, ``vector`` and ``keyword`` pick a mode by name. ``score_threshold``
    drops results below it (scores are in [0, 1]).
    """

    ranker: str = "auto"
    score_threshold: float = 0.0


@dataclass(frozen=True)
class SearchQuery:
    """One search over one or more vector stores."""

    vector_store_ids: list[str]
    query: str | list[str]
    max_num_results: int = 10
    filters: dict[str, Any] | None = None
    """OpenAI's attribute filter (comparison or compound), applied to each file's attributes."""
    ranking: RankingOptions = field(default_factory=RankingOptions)
    mode: SearchMode | None = None
    """Overrides the ranker's mode (Llama Stack's ``mode``); None: from the ranker."""
    rewrite_query: bool = False


@dataclass(frozen=True)
class SearchResult:
    """One chunk found, with where it came from."""

    vector_store_id: str
    file_id: str
    filename: str
    chunk_id: str
    text: str
    score: float
    """In [0, 1], higher is better."""
    attributes: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchOutcome:
    """The query as run (rewritten or not) and what it found, best first."""

    search_query: str
    results: list[SearchResult]
