"""Cutting text into token-sized chunks, and validating OpenAI's ``chunking_strategy``."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ferryman.errors import InvalidRequestError
from ferryman.inference import minilm
from ferryman.knowledge import chunking
from ferryman.knowledge.chunking import TextSpan, chunk_text, count_tokens, resolve_strategy

PARAGRAPH = (
    "Ferries cross the river every hour. The ferryman keeps a log of each crossing, "
    "with the weather and the number of passengers. In winter the service stops at dusk; "
    "in summer it runs until midnight.\n\n"
)
TEXT = "".join(f"Section {i}. " + PARAGRAPH for i in range(30))


def _words(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text)


def test_chunks_hold_at_most_the_limit_and_are_slices_of_the_text() -> None:
    spans = chunk_text(TEXT, 100, 20)
    assert len(spans) > 5
    for span in spans:
        assert span.token_count <= 100
        assert span.token_count == count_tokens(span.text)
        assert TEXT[span.start : span.end] == span.text
        assert span.text == span.text.strip()


def test_no_text_is_lost_between_chunks() -> None:
    spans = chunk_text(TEXT, 120, 0)
    for before, after in zip(spans, spans[1:], strict=False):
        assert TEXT[before.end : after.start].strip() == ""
    assert spans[0].start == 0 and spans[-1].end == len(TEXT.rstrip())
    assert _words(" ".join(span.text for span in spans)) == _words(TEXT)


def test_consecutive_chunks_overlap_by_about_the_overlap() -> None:
    spans = chunk_text(TEXT, 120, 30)
    for before, after in zip(spans, spans[1:], strict=False):
        assert after.start < before.end
        shared = count_tokens(TEXT[after.start : before.end])
        assert 20 <= shared <= 30


def test_chunks_end_at_paragraphs_or_sentences_when_one_is_near() -> None:
    for span in chunk_text(TEXT, 100, 20)[:-1]:
        assert span.text[-1] in ".;"


def test_words_are_not_cut_unless_longer_than_a_chunk() -> None:
    text = " ".join(["antidisestablishmentarianism"] * 200)
    for span in chunk_text(text, 100, 10):
        assert set(span.text.split()) == {"antidisestablishmentarianism"}
    giant = "x" * 5000
    spans = chunk_text(giant, 100, 0)
    assert "".join(span.text for span in spans) == giant


def test_offsets_are_characters_of_the_text_even_past_non_ascii() -> None:
    text = "Café 🚢 naïve résumé. " * 80
    for span in chunk_text(text, 100, 20):
        assert text[span.start : span.end] == span.text


def test_blank_text_gives_no_chunks_and_bad_sizes_are_refused() -> None:
    assert chunk_text("  \n\t ", 100, 10) == []
    assert chunk_text("One short line.", 100, 10) == [
        TextSpan("One short line.", count_tokens("One short line."), 0, 15)
    ]
    for size, overlap in ((0, 0), (100, 100), (100, -1)):
        with pytest.raises(ValueError):
            chunk_text(TEXT, size, overlap)


def test_tokens_are_the_models_word_pieces() -> None:
    if minilm.installed():
        assert count_tokens("tokenization") == 2  # "token", "##ization"
    assert count_tokens("Hello, world!") == 4


def test_auto_and_missing_strategies_fit_the_default_model() -> None:
    auto = {"type": "static", "static": {"max_chunk_size_tokens": 254, "chunk_overlap_tokens": 64}}
    assert resolve_strategy(None) == auto
    assert resolve_strategy({"type": "auto"}) == auto


def test_static_strategies_are_kept_within_openais_bounds() -> None:
    static = {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}
    assert resolve_strategy(static) == static
    for bad in (
        {"type": "static", "static": {"max_chunk_size_tokens": 99, "chunk_overlap_tokens": 0}},
        {"type": "static", "static": {"max_chunk_size_tokens": 4097, "chunk_overlap_tokens": 0}},
        {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 401}},
        {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": -1}},
        {"type": "static", "static": {"max_chunk_size_tokens": True, "chunk_overlap_tokens": 0}},
        {"type": "static", "static": {"max_chunk_size_tokens": 800}},
        {"type": "static"},
        {"type": "other"},
        {},
    ):
        with pytest.raises(InvalidRequestError) as caught:
            resolve_strategy(bad)
        assert caught.value.field == "chunking_strategy"


def test_text_tokenized_in_windows_gives_the_chunks_of_the_whole_text(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "".join(f"Naïve café {i}:\tthe ferry's log, 日本語 page {i}.\n" + PARAGRAPH for i in range(40))
    whole = [chunk_text(text, size, overlap) for size, overlap in ((100, 20), (254, 64), (400, 0))]
    counted = count_tokens(text)
    monkeypatch.setattr(chunking, "WINDOW_CHARS", 97)
    assert [chunk_text(text, size, overlap) for size, overlap in ((100, 20), (254, 64), (400, 0))] == whole
    assert count_tokens(text) == counted


_PEAK = """
import resource, sys
from ferryman.knowledge.chunking import chunk_text
text = ("a" * 120 + " ") * (10 * 1024 * 1024 // 121)
chunk_text("warm up the tokenizer", 254, 64)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
spans = chunk_text(text, 254, 64)
print(len(spans), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


@pytest.mark.skipif(not minilm.installed(), reason="all-MiniLM-L6-v2's tokenizer is not installed")
def test_chunking_ten_megabytes_of_text_takes_little_memory_beyond_it() -> None:
    out = subprocess.run([sys.executable, "-c", _PEAK], capture_output=True, text=True, check=True, timeout=120)
    chunks, grown_kb = map(int, out.stdout.split())
    assert chunks > 400
    assert grown_kb < 100 * 1024  # the whole text through the tokenizer at once: about 700 MB
