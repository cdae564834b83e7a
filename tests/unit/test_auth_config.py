"""``server.auth`` in both of Llama Stack's shapes, and ``ferryman serve`` refusing an open bind without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ferryman.auth_settings import DEFAULT_CLAIMS_MAPPING, AuthSettings
from ferryman.cli import main as cli
from ferryman.cli import serve
from ferryman.config import Settings, load_settings
from ferryman.errors import ConfigurationError

OLD_SHAPE = """
server:
  auth:
    provider_type: oauth2_token
    config:
      jwks: {uri: "https://idp.test/jwks", key_recheck_period: 600}
      issuer: https://idp.test
      audience: ferryman
      claims_mapping: {groups: teams, sub: roles}
    access_policy:
      - permit: {principal: admin, actions: [read]}
"""

NEW_SHAPE = """
server:
  auth:
    provider_config:
      type: oauth2_token
      jwks: {uri: "https://idp.test/jwks", key_recheck_period: 600}
      issuer: https://idp.test
      audience: ferryman
      claims_mapping: {groups: teams, sub: roles}
    access_policy:
      - permit: {principal: admin, actions: [read]}
"""


@pytest.mark.parametrize("text", [OLD_SHAPE, NEW_SHAPE], ids=["provider_type", "provider_config"])
def test_both_llama_stack_shapes_read_the_same(tmp_path: Path, text: str) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(text)
    auth = load_settings(str(config)).auth
    assert auth is not None and auth.provider_config is not None and auth.provider_config.jwks is not None
    assert (auth.provider_config.jwks.uri, auth.provider_config.jwks.key_recheck_period) == (
        "https://idp.test/jwks",
        600,
    )
    assert (auth.provider_config.issuer, auth.provider_config.audience) == ("https://idp.test", "ferryman")
    assert auth.provider_config.claims_mapping == {"groups": "teams", "sub": "roles"}
    assert auth.access_policy == [{"permit": {"principal": "admin", "actions": ["read"]}}]
    assert auth.api_keys


def test_defaults_are_llama_stacks_and_auth_is_off_without_the_section() -> None:
    auth = AuthSettings.model_validate({"provider_config": {"type": "oauth2_token", "jwks": {"uri": "https://x/j"}}})
    assert auth.provider_config is not None and auth.provider_config.jwks is not None
    assert auth.provider_config.audience == "llama-stack" and auth.provider_config.jwks.key_recheck_period == 3600
    assert auth.provider_config.claims_mapping == DEFAULT_CLAIMS_MAPPING
    assert Settings().auth is None


@pytest.mark.parametrize(
    "auth",
    [
        {"provider_type": "custom", "config": {"endpoint": "https://x"}},
        {"provider_config": {"type": "oauth2_token"}},
        {
            "provider_config": {
                "type": "oauth2_token",
                "jwks": {"uri": "u"},
                "introspection": {"url": "u", "client_id": "c", "client_secret": "s"},
            }
        },
        {"api_keys": False},
    ],
    ids=["unsupported type", "no key source", "two key sources", "nothing accepted"],
)
def test_auth_that_cannot_work_is_a_configuration_error(tmp_path: Path, auth: dict[str, Any]) -> None:
    import yaml

    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"server": {"auth": auth}}))
    with pytest.raises(ConfigurationError):
        load_settings(str(config))


def test_the_introspection_secret_is_masked_but_reaches_the_workers() -> None:
    secret = "client-s3cret"
    introspection = {"url": "https://idp/introspect", "client_id": "c", "client_secret": secret}
    settings = Settings(auth=AuthSettings(provider_config={"introspection": introspection}))  # type: ignore[arg-type]
    assert secret not in repr(settings) and secret not in str(settings)
    again = Settings.model_validate_json(settings.model_dump_json())
    assert again.auth is not None and again.auth.provider_config is not None
    assert again.auth.provider_config.introspection is not None
    assert again.auth.provider_config.introspection.client_secret.get_secret_value() == secret


def _serve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(serve.uvicorn, "run", lambda app, **options: seen.update(options))
    monkeypatch.setattr(serve, "check_listen", lambda host, port: None)  # nothing listens: uvicorn.run is replaced
    monkeypatch.setattr(serve, "migrate_apart", lambda db: None)  # no database is opened: uvicorn.run is replaced
    code = cli.main(["serve", "--inference-url", "http://127.0.0.1:9/v1", "--db", str(tmp_path / "x.db"), *argv])
    return code, seen


def test_serve_refuses_an_open_bind_without_auth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for host in ("0.0.0.0", "::", "192.168.1.5", "example.com"):
        code, seen = _serve(monkeypatch, tmp_path, "--host", host)
        assert (code, seen) == (2, {}), host
        message = capsys.readouterr().err
        assert message.count("\n") == 1 and "--insecure-no-auth" in message and host in message


def test_serve_binds_loopback_without_auth_and_anywhere_with_it_or_when_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for host in ("127.0.0.1", "::1", "localhost"):
        assert _serve(monkeypatch, tmp_path, "--host", host)[0] == 0, host
    assert _serve(monkeypatch, tmp_path, "--host", "0.0.0.0", "--insecure-no-auth")[1]["host"] == "0.0.0.0"
    config = tmp_path / "auth.yaml"
    config.write_text("server:\n  auth:\n    api_keys: true\n")
    assert _serve(monkeypatch, tmp_path, "--host", "0.0.0.0", "--config", str(config))[1]["host"] == "0.0.0.0"
