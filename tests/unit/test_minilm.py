"""all-MiniLM-L6-v2 in numpy against sentence-transformers' embeddings; its provider; the router's embedding calls.

``tests/fixtures/minilm_reference.json`` was made with sentence-transformers on
PyTorch from the same model files (its ``note`` says how).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from ferryman.api.content import UserMessage
from ferryman.api.registry import Model
from ferryman.errors import ConfigurationError, InvalidRequestError
from ferryman.inference import minilm, minilm_files
from ferryman.inference.base import ChatChunk, ChatRequest, EmbeddingProvider, ModelInfo
from ferryman.inference.local_embeddings import PROVIDER_ID, LocalEmbeddingProvider, local_embeddings_available
from ferryman.inference.router import ModelRouter

pytestmark = pytest.mark.skipif(not local_embeddings_available(), reason="all-MiniLM-L6-v2 is not installed")

REFERENCE = json.loads((Path(__file__).parent.parent / "fixtures" / "minilm_reference.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def encoder() -> minilm.MiniLM:
    return minilm.MiniLM()


def test_embeddings_match_sentence_transformers(encoder: minilm.MiniLM) -> None:
    ours = encoder.encode(REFERENCE["texts"])
    reference = np.asarray(REFERENCE["embeddings"], dtype=np.float32)
    cosines = (ours * reference).sum(axis=1) / np.linalg.norm(reference, axis=1)
    assert ours.shape == (len(REFERENCE["texts"]), minilm.DIMENSION)
    assert cosines.min() > 0.9999, cosines
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_batching_by_length_keeps_each_text_its_own_vector(encoder: minilm.MiniLM) -> None:
    texts = REFERENCE["texts"]
    together = encoder.encode(texts)
    one_by_one = np.vstack([encoder.encode([text]) for text in reversed(texts)])[::-1]
    assert np.allclose(together, one_by_one, atol=1e-5)


def test_long_texts_are_truncated_at_256_word_pieces(encoder: minilm.MiniLM) -> None:
    long_text = REFERENCE["texts"][-1]
    assert len(encoder.token_ids([long_text])[0]) == minilm.MAX_TOKENS
    longer = encoder.encode([long_text + " Words past the limit change nothing." * 20])
    assert np.allclose(longer, encoder.encode([long_text]), atol=1e-6)


def test_related_texts_are_nearer_than_unrelated_ones(encoder: minilm.MiniLM) -> None:
    cat, kitten, tax = encoder.encode(
        ["A cat sleeps on the sofa.", "A kitten naps on the couch.", "Quarterly tax filing"]
    )
    assert float(cat @ kitten) > float(cat @ tax) + 0.3


def test_files_other_than_the_verified_ones_are_refused(tmp_path: Path) -> None:
    shutil.copy(minilm_files.model_dir() / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "model.safetensors").write_bytes(b"not the weights")
    with pytest.raises(ConfigurationError, match="not the all-MiniLM-L6-v2 file"):
        minilm.MiniLM(tmp_path)


@pytest.mark.anyio
async def test_the_provider_lists_and_embeds_its_one_model() -> None:
    provider = LocalEmbeddingProvider()
    assert isinstance(provider, EmbeddingProvider)
    assert await provider.list_models() == [
        ModelInfo("all-MiniLM-L6-v2", "embedding", {"embedding_dimension": 384, "context_length": 256})
    ]
    vectors = await provider.embed("all-MiniLM-L6-v2", REFERENCE["texts"][:2])
    cosines = (np.asarray(vectors) * np.asarray(REFERENCE["embeddings"][:2])).sum(axis=1)
    assert cosines.min() > 0.9999, cosines
    assert await provider.embed("all-MiniLM-L6-v2", []) == []
    with pytest.raises(InvalidRequestError):
        await provider.embed("other-model", ["text"])


@pytest.mark.anyio
async def test_the_provider_does_not_chat() -> None:
    request = ChatRequest(model="all-MiniLM-L6-v2", messages=[UserMessage(content="hi")])
    with pytest.raises(InvalidRequestError, match="embedding model"):
        async for _ in LocalEmbeddingProvider().stream_chat(request):
            pass


class _ChatOnly:
    provider_id = "chat"

    async def list_models(self) -> list[ModelInfo]:
        return [ModelInfo("chatty")]

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        raise AssertionError("not called")
        yield

    async def aclose(self) -> None:
        return None


@pytest.mark.anyio
async def test_the_router_picks_and_checks_embedding_models() -> None:
    router = ModelRouter([_ChatOnly(), LocalEmbeddingProvider()])
    await router.refresh()
    assert router.embedding_model(None).identifier == "all-MiniLM-L6-v2"
    assert router.embedding_model("all-MiniLM-L6-v2").metadata["embedding_dimension"] == 384
    for wrong in ("chatty", "missing"):
        with pytest.raises(InvalidRequestError) as caught:
            router.embedding_model(wrong)
        assert caught.value.field == "embedding_model"
    vectors = await router.embed("all-MiniLM-L6-v2", ["hello"])
    assert len(vectors) == 1 and len(vectors[0]) == 384
    with pytest.raises(InvalidRequestError, match="does not serve embeddings"):
        await router.embed("chatty", ["hello"])


@pytest.mark.anyio
async def test_the_configured_default_embedding_model_wins() -> None:
    declared = Model(
        identifier="minilm-alias",
        provider_id=PROVIDER_ID,
        provider_resource_id="all-MiniLM-L6-v2",
        model_type="embedding",
        metadata={"embedding_dimension": 384},
    )
    router = ModelRouter([LocalEmbeddingProvider()], [declared])
    await router.refresh()
    router.default_embedding_model = "minilm-alias"
    assert router.embedding_model(None) == declared
    assert len((await router.embed("minilm-alias", ["aliased"]))[0]) == 384


def test_no_embedding_model_at_all_is_a_400() -> None:
    with pytest.raises(InvalidRequestError, match="no embedding model"):
        ModelRouter([_ChatOnly()]).embedding_model(None)
