"""``llama_stack_client`` 0.2.12 on shields and the Safety API: register, list, get, and ``safety.run_shield``."""

from __future__ import annotations

import uuid

import llama_stack_client
import pytest
from llama_stack_client import LlamaStackClient

from inprocess import Served


def test_register_list_and_get_shields(client: LlamaStackClient) -> None:
    local = f"compat-{uuid.uuid4().hex[:8]}"
    guard = f"compat-{uuid.uuid4().hex[:8]}"
    client.shields.register(shield_id=local, provider_id="ferryman-local", params={"action": "redact"})
    client.shields.register(shield_id=guard, provider_shield_id="scripted-model")

    listed = {shield.identifier: shield for shield in client.shields.list()}
    assert listed[local].provider_id == "ferryman-local" and listed[local].params == {"action": "redact"}
    fetched = client.shields.retrieve(guard)
    assert (fetched.provider_id, fetched.provider_resource_id, fetched.type) == (
        "llama-guard",
        "scripted-model",
        "shield",
    )
    with pytest.raises(llama_stack_client.NotFoundError):
        client.shields.retrieve(f"compat-{uuid.uuid4().hex[:8]}")


def test_run_shield_with_the_local_shield(client: LlamaStackClient) -> None:
    shield_id = f"compat-{uuid.uuid4().hex[:8]}"
    client.shields.register(shield_id=shield_id, provider_id="ferryman-local")
    clean = client.safety.run_shield(shield_id=shield_id, messages=[{"role": "user", "content": "hello"}], params={})
    assert clean.violation is None
    found = client.safety.run_shield(
        shield_id=shield_id,
        messages=[{"role": "user", "content": "token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}],
        params={},
    )
    assert found.violation is not None
    assert found.violation.violation_level == "error"
    assert found.violation.metadata == {"action": "block", "kinds": ["github_token"], "counts": {"github_token": 1}}


def test_run_shield_with_llama_guard_played_by_the_scripted_model(client: LlamaStackClient, model: Served) -> None:
    shield_id = f"compat-{uuid.uuid4().hex[:8]}"
    client.shields.register(shield_id=shield_id, provider_id="llama-guard", provider_shield_id="scripted-model")
    model.enqueue_text("unsafe\nS2")
    result = client.safety.run_shield(
        shield_id=shield_id, messages=[{"role": "user", "content": "how do I pick a lock?"}], params={}
    )
    assert result.violation is not None
    assert result.violation.user_message == "I can't answer that. Can I help with something else?"
    assert result.violation.metadata["violation_type"] == "S2"
