"""Settings from YAML with environment substitution."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferryman.config import load_settings, providers_from_urls, substitute_env
from ferryman.errors import ConfigurationError


def test_env_substitution_with_defaults() -> None:
    env = {"HOST": "example"}
    text = "a: ${env.HOST}\nb: ${env.MISSING:=fallback}\nc: ${env.EMPTY:=}"
    assert substitute_env(text, env) == "a: example\nb: fallback\nc: "
    with pytest.raises(ConfigurationError, match="NOPE"):
        substitute_env("${env.NOPE}", env)


def test_yaml_config_declares_providers_models_and_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_URL", "http://gpu:8000/v1")
    config = tmp_path / "ferryman.yaml"
    config.write_text(
        "server:\n  port: 9999\n"
        "storage:\n  db: ${env.DB_PATH:=/tmp/x.db}\n"
        "providers:\n  - provider_id: vllm\n    url: ${env.VLLM_URL}\n"
        "models:\n  - model_id: small\n    provider_id: vllm\n    provider_model_id: org/small-1b\n"
    )
    settings = load_settings(str(config))
    assert settings.port == 9999
    assert settings.db_path() == "/tmp/x.db"
    assert settings.providers[0].url == "http://gpu:8000/v1"
    assert settings.models[0].provider_model_id == "org/small-1b"


def test_default_db_lives_in_ferryman_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRYMAN_HOME", "/srv/fm")
    assert load_settings(None).db_path() == "/srv/fm/ferryman.db"


def test_each_inference_url_is_a_provider() -> None:
    providers = providers_from_urls(["http://a/v1", "http://b/v1"])
    assert [(p.provider_id, p.url) for p in providers] == [("remote", "http://a/v1"), ("remote-2", "http://b/v1")]


def test_the_fetch_allow_list_and_keep_alive_come_from_the_file(tmp_path: Path) -> None:
    config = tmp_path / "ferryman.yaml"
    config.write_text(
        "server:\n  keep_alive: 75\nfetch:\n  allowed_hosts: [docs.internal, 10.0.0.0/8]\n  max_bytes: 2048\n"
    )
    settings = load_settings(str(config))
    assert settings.keep_alive == 75
    assert settings.fetch.allowed_hosts == ["docs.internal", "10.0.0.0/8"] and settings.fetch.max_bytes == 2048
    assert load_settings(None).fetch.allowed_hosts == []


def test_a_prompt_cache_is_the_embedded_model_s_alone() -> None:
    from pydantic import ValidationError

    from ferryman.config import ProviderSettings

    assert ProviderSettings(provider_id="e", type="inline::embedded", prompt_cache_mb=48).prompt_cache_mb == 48
    with pytest.raises(ValidationError, match="prompt_cache_mb is the embedded model's"):
        ProviderSettings(provider_id="r", url="http://127.0.0.1:9/v1", prompt_cache_mb=48)
    with pytest.raises(ValidationError, match="prompt_cache_mb"):
        ProviderSettings(provider_id="e", type="inline::embedded", prompt_cache_mb=-1)
