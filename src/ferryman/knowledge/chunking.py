"""Cutting text into chunks of a number of tokens, and OpenAI's ``chunking_strategy``.

Tokens are counted with the word-piece tokenizer of all-MiniLM-L6-v2 (its
``tokenizer.json``, through ``tokenizers``) when the model's package is
installed, so that a chunk's count is what the default embedding model reads.
Without it, a regex tokenizer stands in: each run of word characters and each
other non-space character is a token (fewer than word pieces on long words).

Each chunk is a slice of the text, from its first token's start to its last
token's end, so that chunks lose nothing but the spaces between them and read
as the text does. Chunks end where a paragraph, a line or a sentence ends when
one is near the size limit, else between words; only a word longer than a
chunk is cut inside.

Text is tokenized a window at a time (:data:`WINDOW_CHARS`, cut between
words, where both tokenizers cut anyway), and chunked as the windows come: a
tokenizer's working memory on a whole file of tens of megabytes runs to
gigabytes, and that file's offsets alone to one or two.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeGuard

from ferryman.errors import InvalidRequestError
from ferryman.inference import minilm_files

MIN_CHUNK_TOKENS = 100
MAX_CHUNK_TOKENS = 4096
AUTO_CHUNK_TOKENS = 254
"""``auto``'s chunk size: the default model reads 256 word pieces, two of them its ``[CLS]`` and ``[SEP]``.

OpenAI's ``auto`` (800 tokens, 400 overlap) suits a model that reads 8k tokens;
with a 256-token model, the words of an 800-token chunk past the 254th would be
invisible to vector search.
"""
AUTO_OVERLAP_TOKENS = 64
"""``auto``'s overlap: a quarter of a chunk, so a sentence cut at a chunk's end is whole in the next one."""

WINDOW_CHARS = 1 << 16
"""Characters given to the tokenizer at once: more, up to the next space; a word longer than this may be cut."""
_WORDS = re.compile(r"\w+|[^\w\s]")
_WINDOW_BREAK = re.compile(r"[ \t\n\r]")
"""Where a window may end: a space both tokenizers split at (not every ``\\s``: BERT's drops some as control)."""
_SENTENCE_ENDS = frozenset(".!?;:")

Offsets = list[tuple[int, int]]


@dataclass(frozen=True)
class TextSpan:
    """One chunk: its text (``text[start:end]`` of the source) and how many tokens it holds."""

    text: str
    token_count: int
    start: int
    end: int


def _regex_offsets(text: str) -> Offsets:
    return [match.span() for match in _WORDS.finditer(text)]


@functools.cache
def _tokenizer() -> Callable[[str], Offsets]:
    if not minilm_files.installed():
        return _regex_offsets
    tokenizer = minilm_files.tokenizer()

    def offsets(text: str) -> Offsets:
        return list(tokenizer.encode(text, add_special_tokens=False).offsets)

    return offsets


def _windows(text: str) -> Iterator[Offsets]:
    """The offsets of ``text``'s tokens, a window of text at a time."""
    tokenize = _tokenizer()
    start = 0
    while start < len(text):
        end = start + WINDOW_CHARS
        if end < len(text):
            space = _WINDOW_BREAK.search(text, end, end + WINDOW_CHARS)
            end = space.start() if space else min(end + WINDOW_CHARS, len(text))
        yield [(first + start, last + start) for first, last in tokenize(text[start:end])]
        start = end


def token_offsets(text: str) -> Offsets:
    """The ``(start, end)`` character offsets in ``text`` of each of its tokens."""
    return [offset for window in _windows(text) for offset in window]


def count_tokens(text: str) -> int:
    """How many tokens ``text`` holds (word pieces of the default embedding model, see the module docstring)."""
    return sum(len(window) for window in _windows(text))


def chunk_text(text: str, max_tokens: int, overlap_tokens: int) -> list[TextSpan]:
    """Cut ``text`` into chunks of at most ``max_tokens`` tokens, each sharing about ``overlap_tokens`` with the last.

    Args:
        text: The text; one without tokens (empty or blank) gives no chunks.
        max_tokens: The most tokens in a chunk (at least 1).
        overlap_tokens: Tokens a chunk repeats from the end of the one before (less than ``max_tokens``).

    Raises:
        ValueError: the sizes are not as above.
    """
    if max_tokens < 1 or not 0 <= overlap_tokens < max_tokens:
        raise ValueError(f"invalid chunk sizes: {max_tokens} tokens, {overlap_tokens} overlapping")
    windows = _windows(text)
    offsets: Offsets = []  # the tokens from (about) the current chunk's start on
    spans: list[TextSpan] = []
    start = 0
    while True:
        # One token past a full chunk tells whether a chunk ends at its limit; the last window, where text ends.
        while len(offsets) - start <= max_tokens and (window := next(windows, None)) is not None:
            offsets.extend(window)
        if start >= len(offsets):
            break
        end = _cut(text, offsets, start, max_tokens)
        spans.append(
            TextSpan(text[offsets[start][0] : offsets[end - 1][1]], end - start, offsets[start][0], offsets[end - 1][1])
        )
        if end == len(offsets):
            break
        start = _next_start(offsets, start, end, overlap_tokens)
        if start >= WINDOW_CHARS:
            del offsets[:start]
            start = 0
    return spans


def _rank(text: str, offsets: Offsets, index: int) -> int:
    """How good a place to end a chunk before token ``index`` is: 0 inside a word … 3 between paragraphs."""
    gap = text[offsets[index - 1][1] : offsets[index][0]]
    if not gap:
        return 0
    if "\n\n" in gap:
        return 3
    if "\n" in gap or text[offsets[index - 1][1] - 1] in _SENTENCE_ENDS:
        return 2
    return 1


def _cut(text: str, offsets: Offsets, start: int, max_tokens: int) -> int:
    """The end (exclusive token index) of the chunk that begins at token ``start``."""
    limit = min(start + max_tokens, len(offsets))
    if limit == len(offsets):
        return limit
    # A break of the best kind in the chunk's last quarter, else any break between words past its middle.
    best, best_rank = limit, _rank(text, offsets, limit)
    for index in range(limit - 1, start + max(1, max_tokens * 3 // 4) - 1, -1):
        rank = _rank(text, offsets, index)
        if rank > best_rank:
            best, best_rank = index, rank
    if best_rank == 0:
        for index in range(limit - 1, start + max(1, max_tokens // 2) - 1, -1):
            if _rank(text, offsets, index) > 0:
                return index
    return best


def _next_start(offsets: Offsets, start: int, end: int, overlap_tokens: int) -> int:
    """Where the chunk after ``[start, end)`` begins: ``overlap_tokens`` back, moved forward to a word's start."""
    candidate = max(end - overlap_tokens, start + 1)
    for index in range(candidate, end):
        if offsets[index][0] > offsets[index - 1][1]:
            return index
    return end


def resolve_strategy(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Validate an OpenAI ``chunking_strategy``; return the static form that is stored.

    None and ``{"type": "auto"}`` give :data:`AUTO_CHUNK_TOKENS` / :data:`AUTO_OVERLAP_TOKENS`;
    ``static`` needs ``max_chunk_size_tokens`` in 100..4096 and ``chunk_overlap_tokens``
    at most half of it.

    Raises:
        InvalidRequestError: anything else (``field`` is ``chunking_strategy``).
    """
    field = "chunking_strategy"
    kind = "auto" if raw is None else raw.get("type")
    if kind == "auto":
        return _static(AUTO_CHUNK_TOKENS, AUTO_OVERLAP_TOKENS)
    if kind != "static" or raw is None:
        raise InvalidRequestError(f"chunking_strategy type must be 'auto' or 'static', not {kind!r}", field)
    static = raw.get("static")
    if not isinstance(static, dict):
        raise InvalidRequestError("a static chunking_strategy needs its 'static' object", field)
    size, overlap = static.get("max_chunk_size_tokens"), static.get("chunk_overlap_tokens")
    if not _is_int(size) or not MIN_CHUNK_TOKENS <= size <= MAX_CHUNK_TOKENS:
        raise InvalidRequestError(
            f"max_chunk_size_tokens must be an integer from {MIN_CHUNK_TOKENS} to {MAX_CHUNK_TOKENS}", field
        )
    if not _is_int(overlap) or not 0 <= overlap <= size // 2:
        raise InvalidRequestError(
            "chunk_overlap_tokens must be an integer from 0 to half of max_chunk_size_tokens", field
        )
    return _static(size, overlap)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _static(size: int, overlap: int) -> dict[str, Any]:
    return {"type": "static", "static": {"max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap}}
