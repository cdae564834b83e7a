"""Pulled models: the manifest, ``hf://`` sources, and the embedded providers ``ferryman serve`` makes of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferryman.cli import embedded_providers as embedded
from ferryman.cli.embedded_providers import embedded_providers
from ferryman.cli.serve import _with_embedded
from ferryman.config import EMBEDDED_TYPE, ProviderSettings, Settings
from ferryman.errors import ConfigurationError, InvalidRequestError
from ferryman.inference.embedded import DEFAULT_MODEL_ID
from ferryman.inference.hub_pull import PullRequest, parse_source, pull
from ferryman.inference.pulled import PulledModel, PulledModels


def _model(name: str, path: str | None = None) -> PulledModel:
    return PulledModel(
        name=name,
        repo_id="owner/repo",
        filename=f"{name}.gguf",
        commit="c" * 40,
        sha256="s" * 64,
        size=3,
        path=path or f"owner/repo/{name}.gguf",
        pulled_at=0,
    )


@pytest.fixture()
def pulled(tmp_path: Path) -> PulledModels:
    models = PulledModels(tmp_path / "models")
    models.add(_model("big"))
    models.add(_model("other"))
    return models


def test_sources_name_a_repository_and_a_file() -> None:
    assert parse_source("owner/repo", "model.gguf") == ("owner/repo", "model.gguf")
    assert parse_source("hf://owner/repo/sub/model.gguf", None) == ("owner/repo", "sub/model.gguf")
    for source, filename in (("hf://owner/repo", None), ("owner/repo", None), ("hf://owner/repo/a.gguf", "b.gguf")):
        with pytest.raises(InvalidRequestError):
            parse_source(source, filename)


def test_the_manifest_replaces_a_model_of_the_same_name_and_forgets_one(pulled: PulledModels) -> None:
    pulled.add(_model("big", "owner/repo/v2/big.gguf"))
    assert [(m.name, m.path) for m in pulled.all()] == [
        ("other", "owner/repo/other.gguf"),
        ("big", "owner/repo/v2/big.gguf"),
    ]
    assert pulled.remove("other") == _model("other")
    assert pulled.remove("other") is None
    assert [m.name for m in PulledModels(pulled.directory).all()] == ["big"]


def test_an_unreadable_manifest_is_named(tmp_path: Path) -> None:
    (tmp_path / "models.json").write_text('{"models": [{"name": "x"}]}')
    with pytest.raises(ConfigurationError, match="unreadable pulled-models manifest"):
        PulledModels(tmp_path).all()


def test_without_a_model_smollm2_is_the_default_and_every_pulled_model_is_served(pulled: PulledModels) -> None:
    for model in (None, DEFAULT_MODEL_ID):
        providers = embedded_providers(model, pulled)
        assert [(p.provider_id, p.model_id, p.model_path) for p in providers] == [
            ("embedded", None, None),
            ("embedded-big", "big", str(pulled.directory / "owner/repo/big.gguf")),
            ("embedded-other", "other", str(pulled.directory / "owner/repo/other.gguf")),
        ]
    assert [p.provider_id for p in embedded_providers(None, PulledModels(pulled.directory / "none"))] == ["embedded"]


def test_a_pulled_model_named_is_the_embedded_providers_model(
    pulled: PulledModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded, "default_model_path", lambda: None)  # SmolLM2 not installed: not needed either
    providers = embedded_providers("big", pulled)
    assert [(p.provider_id, p.model_id) for p in providers] == [("embedded", "big"), ("embedded-other", "other")]
    assert providers[0].model_path == str(pulled.directory / "owner/repo/big.gguf")
    assert all(p.type == EMBEDDED_TYPE for p in providers)


def test_a_gguf_file_can_be_named_and_anything_else_is_refused(pulled: PulledModels, tmp_path: Path) -> None:
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"GGUF")
    assert embedded_providers(str(gguf), pulled)[0].model_path == str(gguf)
    with pytest.raises(ConfigurationError, match="no pulled model 'nope' \\(pulled: big, other;"):
        embedded_providers("nope", pulled)


def test_model_with_configured_providers_puts_the_embedded_one_first(
    pulled: PulledModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRYMAN_HOME", str(pulled.directory.parent))
    remote = ProviderSettings(provider_id="remote", url="http://127.0.0.1:9/v1")
    settings = Settings(providers=[remote])
    assert _with_embedded(settings, None) == settings
    served = _with_embedded(settings, "big").providers
    assert [(p.provider_id, p.model_id) for p in served] == [("embedded", "big"), ("remote", None)]
    clash = Settings(providers=[ProviderSettings(provider_id="embedded", type=EMBEDDED_TYPE)])
    with pytest.raises(ConfigurationError, match="--model needs the provider id 'embedded'"):
        _with_embedded(clash, "big")


@pytest.mark.parametrize(
    ("repo_id", "filename"),
    [
        ("../evil", "model.gguf"),
        ("owner/../../evil", "model.gguf"),
        ("/etc", "model.gguf"),
        ("owner/repo", "../../../outside.gguf"),
        ("owner/repo", "sub/../../../outside.gguf"),
        ("owner/repo", "/etc/outside.gguf"),
        ("owner/repo", "sub\\..\\..\\outside.gguf"),
    ],
)
def test_a_repository_or_file_escaping_the_models_directory_is_refused_before_any_request(
    tmp_path: Path, repo_id: str, filename: str
) -> None:
    models = PulledModels(tmp_path / "home" / "models")
    with pytest.raises(InvalidRequestError):  # the endpoint is closed: refused before any request
        pull(PullRequest(repo_id, filename), models, endpoint="http://127.0.0.1:9")
    assert not (tmp_path / "home").exists()


def test_smollm2_stays_served_beside_a_pulled_model_named_when_it_is_installed(
    pulled: PulledModels, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(embedded, "default_model_path", lambda: tmp_path / "smollm2.gguf")
    providers = embedded_providers("big", pulled)
    assert [(p.provider_id, p.model_id) for p in providers] == [
        ("embedded", "big"),
        (f"embedded-{DEFAULT_MODEL_ID}", None),
        ("embedded-other", "other"),
    ]
