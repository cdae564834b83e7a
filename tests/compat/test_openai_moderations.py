"""``POST /v1/moderations`` driven with the real ``openai`` SDK: the answer parses as ``ModerationCreateResponse``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import openai
import pytest

from inprocess import BASE_URL, Served


@pytest.fixture()
def sdk(model: Served) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=model.sdk_http_client(), api_key="unused", max_retries=0, timeout=30
    ) as client:
        yield client


def test_moderations_with_a_guard_shield(sdk: openai.OpenAI, http: httpx.Client, model: Served) -> None:
    shield_id = f"guard-{uuid.uuid4().hex[:8]}"
    registered = {"shield_id": shield_id, "provider_id": "llama-guard", "provider_shield_id": "scripted-model"}
    assert http.post("/v1/shields", json=registered).status_code == 200
    model.enqueue_text("unsafe\nS1,S11")
    model.enqueue_text("safe")

    answer = sdk.moderations.create(model=shield_id, input=["a threat", "a greeting"])

    assert answer.model == shield_id and answer.id.startswith("modr-")
    flagged, clean = answer.results
    assert flagged.flagged and flagged.categories.violence and flagged.categories.self_harm
    assert not flagged.categories.hate and flagged.category_scores.violence == 1.0
    assert not clean.flagged and clean.category_scores.self_harm == 0.0
    assert clean.category_applied_input_types.violence == ["text"]


def test_moderations_of_one_string_with_the_local_shield(sdk: openai.OpenAI, http: httpx.Client) -> None:
    shield_id = f"local-{uuid.uuid4().hex[:8]}"
    assert http.post("/v1/shields", json={"shield_id": shield_id, "provider_id": "ferryman-local"}).status_code == 200
    [result] = sdk.moderations.create(model=shield_id, input="card 4111-1111-1111-1111").results
    assert result.flagged and not result.categories.sexual
    with pytest.raises(openai.BadRequestError):
        sdk.moderations.create(model="no-such-model", input="x")
