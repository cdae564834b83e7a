"""The numpy MiniLM's batching by length, its worker threads and its GELU, against reference vectors.

``tests/fixtures/minilm_numpy_v1.json`` holds vectors of varied texts (empty,
code, French, Japanese, two truncated at 256 word pieces) made by the forward
pass before these changes: stores hold such vectors, so they must stay valid.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ferryman.inference import minilm
from ferryman.inference.local_embeddings import local_embeddings_available

pytestmark = pytest.mark.skipif(not local_embeddings_available(), reason="all-MiniLM-L6-v2 is not installed")

FIXTURES = Path(__file__).parent.parent / "fixtures"
REFERENCE = json.loads((FIXTURES / "minilm_reference.json").read_text("utf-8"))
PREVIOUS = json.loads((FIXTURES / "minilm_numpy_v1.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def encoder() -> minilm.MiniLM:
    return minilm.MiniLM()


def _cosines(ours: np.ndarray, theirs: list[list[float]]) -> np.ndarray:
    reference = np.asarray(theirs, dtype=np.float32)
    cosines: np.ndarray = (ours * reference).sum(axis=1) / np.linalg.norm(reference, axis=1)
    return cosines


def test_every_reference_text_is_within_cosine_0999_of_sentence_transformers(encoder: minilm.MiniLM) -> None:
    cosines = _cosines(encoder.encode(REFERENCE["texts"]), REFERENCE["embeddings"])
    assert cosines.shape == (len(REFERENCE["texts"]),)
    assert cosines.min() >= 0.999, cosines


def test_stored_vectors_of_the_previous_forward_pass_stay_valid(encoder: minilm.MiniLM) -> None:
    texts = PREVIOUS["texts"]
    assert [len(ids) for ids in encoder.token_ids(texts)] == PREVIOUS["token_counts"]
    cosines = _cosines(encoder.encode(texts), PREVIOUS["embeddings"])
    assert cosines.min() >= 0.999, cosines


def test_batching_by_length_returns_vectors_in_input_order(encoder: minilm.MiniLM) -> None:
    texts = [*PREVIOUS["texts"], *REFERENCE["texts"]]
    order = np.random.default_rng(7).permutation(len(texts))
    shuffled = encoder.encode([texts[i] for i in order])
    in_order = encoder.encode(texts)
    assert np.allclose(shuffled, in_order[order], atol=1e-5)


def test_a_batch_of_very_short_and_very_long_texts_equals_encoding_them_one_by_one(encoder: minilm.MiniLM) -> None:
    long_text = PREVIOUS["texts"][-2]
    texts = ["ok", long_text, "", "A cat sleeps on the sofa.", long_text + " and then some", "x", REFERENCE["texts"][2]]
    together = encoder.encode(texts)
    one_by_one = np.vstack([encoder.encode([text]) for text in texts])
    assert (together * one_by_one).sum(axis=1).min() >= 0.9999


def test_batches_group_by_length_within_the_token_budget() -> None:
    lengths = [3, 256, 40, 256, 12, 90, 90, 5, 256, 41] * 3
    ids = [[1] * length for length in lengths]
    batches = list(minilm._batches(ids, workers=2))
    assert sorted(i for batch in batches for i in batch) == list(range(len(ids)))
    for batch in batches:
        padded = max(lengths[i] for i in batch)
        assert len(batch) * padded <= minilm._BATCH_TOKENS or len(batch) == 1
        assert len(batch) <= math.ceil(len(ids) / 2)
    longest = [max(lengths[i] for i in batch) for batch in batches]
    assert longest == sorted(longest, reverse=True)


def test_no_texts_make_no_vectors(encoder: minilm.MiniLM) -> None:
    assert encoder.encode([]).shape == (0, minilm.DIMENSION)


def test_a_few_texts_still_make_one_batch_per_worker() -> None:
    assert [len(batch) for batch in minilm._batches([[1, 2]] * 3, workers=2)] == [2, 1]
    assert [len(batch) for batch in minilm._batches([[1, 2]] * 3, workers=1)] == [3]


def test_one_worker_and_several_give_the_same_vectors(encoder: minilm.MiniLM, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [*PREVIOUS["texts"], *REFERENCE["texts"]] * 2
    monkeypatch.setattr(minilm, "WORKERS", 1)
    alone = encoder.encode(texts)
    monkeypatch.setattr(minilm, "WORKERS", 3)
    shared = encoder.encode(texts)
    assert (alone * shared).sum(axis=1).min() >= 0.99999


def test_the_gelu_stays_near_the_exact_one_and_tends_to_zero_below() -> None:
    points = np.linspace(-8, 8, 3201, dtype=np.float32)
    exact = np.array([x * (1 + math.erf(x / math.sqrt(2))) / 2 for x in points.tolist()], dtype=np.float32)
    assert np.abs(minilm._gelu_(points.copy()) - exact).max() < 5e-4
    with np.errstate(over="ignore"):
        far = minilm._gelu_(np.array([-1000.0, -60.0, 60.0, 1000.0], dtype=np.float32))
    assert far.tolist() == [0.0, 0.0, 60.0, 1000.0]
