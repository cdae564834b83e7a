"""``/v1/embeddings`` and ``/v1/models`` with the offline all-MiniLM-L6-v2, driven with the real ``openai`` SDK.

Ferryman runs in this process beside a scripted chat model; the SDK reaches it over ASGI.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import numpy as np
import openai
import pytest

from ferryman.config import Settings, StorageSettings
from ferryman.errors import UpstreamError
from ferryman.inference.local_embeddings import LocalEmbeddingProvider, local_embeddings_available
from ferryman.inference.openai_remote import OpenAICompatibleProvider
from ferryman.inference.router import ModelRouter
from ferryman.server.app import build_services, create_app, services_from_settings
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script
from inprocess import BASE_URL, migrated_sqlite, scripted_provider

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not local_embeddings_available(), reason="all-MiniLM-L6-v2 is not installed"),
]

MODEL = "all-MiniLM-L6-v2"
REFERENCE = json.loads((Path(__file__).parent.parent / "fixtures" / "minilm_reference.json").read_text("utf-8"))


@pytest.fixture()
async def client(tmp_path: Path) -> AsyncIterator[openai.AsyncOpenAI]:
    """The ``openai`` SDK on an app serving the scripted chat model and the local embedding model."""
    script = Script()
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "ferryman.db")),
        [scripted_provider(script), LocalEmbeddingProvider()],
        sole_process=True,
    )
    app = create_app(services)
    async with app.router.lifespan_context(app):
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL)
        sdk = openai.AsyncOpenAI(base_url=f"{BASE_URL}/v1", api_key="unused", http_client=http, max_retries=0)
        async with sdk:
            yield sdk
    script.check()


async def test_the_models_list_the_embedding_model(client: openai.AsyncOpenAI) -> None:
    answer = await client.get("/models", cast_to=httpx2.Response)
    models = {model["identifier"]: model for model in answer.json()["data"]}
    assert models[MODEL]["model_type"] == "embedding"
    assert models[MODEL]["provider_id"] == "local-embeddings"
    assert models[MODEL]["metadata"] == {"embedding_dimension": 384, "context_length": 256}
    assert models["scripted-model"]["model_type"] == "llm"


async def test_floats_match_the_reference_embeddings(client: openai.AsyncOpenAI) -> None:
    texts = REFERENCE["texts"][:3]
    result = await client.embeddings.create(model=MODEL, input=texts, encoding_format="float")
    assert result.model == MODEL and result.object == "list"
    assert [item.index for item in result.data] == [0, 1, 2]
    for item, reference in zip(result.data, REFERENCE["embeddings"], strict=False):
        assert len(item.embedding) == 384
        assert float(np.dot(item.embedding, reference)) > 0.9999
    assert result.usage.prompt_tokens == result.usage.total_tokens > 10


async def test_base64_is_little_endian_float32(client: openai.AsyncOpenAI) -> None:
    # The SDK asks for base64 unless told otherwise, and decodes it.
    decoded = await client.embeddings.create(model=MODEL, input=REFERENCE["texts"][0])
    assert float(np.dot(decoded.data[0].embedding, REFERENCE["embeddings"][0])) > 0.9999
    raw = await client.post(
        "/embeddings",
        body={"model": MODEL, "input": ["one", "two"], "encoding_format": "base64"},
        cast_to=httpx2.Response,
    )
    vectors = [np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4") for item in raw.json()["data"]]
    assert [vector.shape for vector in vectors] == [(384,), (384,)]
    assert np.allclose([np.linalg.norm(vector) for vector in vectors], 1.0, atol=1e-5)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": ""}, "input"),
        ({"input": []}, "input"),
        ({"input": [1, 2, 3]}, "input"),
        ({"input": "text", "encoding_format": "int8"}, "encoding_format"),
        ({"input": "text", "dimensions": 128}, "dimensions"),
    ],
)
async def test_invalid_requests_are_400s_naming_the_field(
    client: openai.AsyncOpenAI, body: dict[str, object], field: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.post("/embeddings", body={"model": MODEL, **body}, cast_to=httpx2.Response)
    assert caught.value.response.json()["error"]["field"] == field


async def test_an_embedding_model_does_not_chat(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="embedding model"):
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])


def test_a_served_config_lists_the_local_model_unless_turned_off(tmp_path: Path) -> None:
    db = migrated_sqlite(tmp_path / "ferryman.db")
    on = services_from_settings(Settings(storage=StorageSettings(db=db)))
    off = services_from_settings(
        Settings.model_validate({"storage": {"db": db}, "embeddings": {"local": False, "default_model": "other"}})
    )
    assert [provider.provider_id for provider in on.models.providers] == ["local-embeddings"]
    assert off.models.providers == [] and off.models.default_embedding_model == "other"


async def test_http_answer_has_openais_shape(client: openai.AsyncOpenAI) -> None:
    answer = await client.post("/embeddings", body={"model": MODEL, "input": "shape"}, cast_to=httpx2.Response)
    body = answer.json()
    assert set(body) == {"object", "data", "model", "usage"}
    assert set(body["data"][0]) == {"object", "index", "embedding"}
    assert isinstance(body["data"][0]["embedding"], list)
    assert body["usage"] == {"prompt_tokens": 1, "total_tokens": 1}


async def test_a_remote_provider_embeds_through_its_embeddings_endpoint_in_batches() -> None:
    script = Script()
    router = ModelRouter([scripted_provider(script)])
    texts = [f"text {i}" for i in range(300)]
    vectors = await router.embed("scripted-model", texts)
    assert len(vectors) == 300 and all(len(vector) == 8 for vector in vectors)
    sent = [request["embeddings"] for request in script.requests]
    assert [len(body["input"]) for body in sent] == [256, 44]
    assert sent[0]["encoding_format"] == "float" and sent[1]["input"][-1] == "text 299"
    await router.aclose()
    script.check()


async def test_a_remote_embedding_failure_is_an_upstream_error() -> None:
    transport = httpx2.MockTransport(lambda request: httpx2.Response(500, json={"error": {"message": "boom"}}))
    client = httpx2.AsyncClient(transport=transport, base_url="http://broken/v1")
    provider = OpenAICompatibleProvider(
        "broken", "http://broken/v1", api_key="sk-secret", max_retries=0, http_client=client
    )
    with pytest.raises(UpstreamError, match="embedding model m failed upstream") as caught:
        await provider.embed("m", ["text"])
    assert "sk-secret" not in caught.value.message
    await provider.aclose()
