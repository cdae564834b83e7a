"""Bearer tokens at the HTTP edge: JWTs against a JWKS the test serves (with rotation), introspection, the 401."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from auth_support import AUDIENCE, CLIENT_ID, CLIENT_SECRET, ISSUER, Provider, SigningKey, identity_provider

from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.introspection import IntrospectionAuthenticator
from ferryman.auth.jwt_tokens import JwtAuthenticator
from ferryman.auth.principal import Authenticator
from ferryman.auth_settings import AuthSettings, OAuth2TokenSettings
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script
from inprocess import scripted_provider, serving

pytestmark = pytest.mark.anyio

PROTECTED = "/v1/agents"


@pytest.fixture()
def idp() -> Iterator[Provider]:
    with identity_provider() as provider:
        yield provider


def jwks_settings(idp: Provider) -> OAuth2TokenSettings:
    return OAuth2TokenSettings(jwks={"uri": idp.jwks_uri}, issuer=ISSUER, audience=AUDIENCE)


@asynccontextmanager
async def app_with(tmp_path: Path, tokens: Authenticator) -> AsyncIterator[httpx.AsyncClient]:
    store = SqliteStore(str(tmp_path / "auth.db"))
    authenticator = BearerAuthenticator(None, tokens)
    services = build_services(store, [scripted_provider(Script())], sole_process=True, authenticator=authenticator)
    async with serving(services) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="ferryman"'
    assert response.json()["error"] == {"code": "unauthenticated", "message": "authentication required"}


async def test_a_valid_token_is_served_and_refusals_say_nothing_of_why(tmp_path: Path, idp: Provider) -> None:
    key, stranger = idp.keys[0], SigningKey(kid=idp.keys[0].kid)
    now = int(time.time())
    refused = {
        "expired": key.token(exp=now - 120),
        "not yet valid": key.token(nbf=now + 300),
        "wrong issuer": key.token(iss="https://evil.test"),
        "wrong audience": key.token(aud="someone-else"),
        "bad signature": stranger.token(),
        "no expiry": key.token(exp=None),
        "malformed": "not.a.jwt",
    }
    async with app_with(tmp_path, JwtAuthenticator(jwks_settings(idp))) as client:
        assert (await client.get(PROTECTED, headers=bearer(key.token()))).status_code == 200
        # Within the clock skew, an expired token still passes.
        assert (await client.get(PROTECTED, headers=bearer(key.token(exp=now - 10)))).status_code == 200
        for why, token in refused.items():
            response = await client.get(PROTECTED, headers=bearer(token))
            assert response.status_code == 401, why
            assert_refused(response)
        assert_refused(await client.get(PROTECTED))
        assert_refused(await client.get(PROTECTED, headers={"Authorization": f"Basic {key.token()}"}))


async def test_open_paths_need_no_credential(tmp_path: Path, idp: Provider) -> None:
    async with app_with(tmp_path, JwtAuthenticator(jwks_settings(idp))) as client:
        for path in ("/v1/health", "/openapi.json", "/docs"):
            assert (await client.get(path)).status_code == 200, path
        assert_refused(await client.get("/v1/models"))


async def test_a_rotated_key_is_fetched_without_restart(tmp_path: Path, idp: Provider) -> None:
    old = idp.keys[0]
    async with app_with(tmp_path, JwtAuthenticator(jwks_settings(idp), refetch_interval=0)) as client:
        assert (await client.get(PROTECTED, headers=bearer(old.token()))).status_code == 200
        assert (await client.get(PROTECTED, headers=bearer(old.token()))).status_code == 200
        assert idp.jwks_reads == 1  # cached
        new = SigningKey()
        idp.keys = [new]
        assert (await client.get(PROTECTED, headers=bearer(new.token()))).status_code == 200
        assert idp.jwks_reads == 2
        # A key id nobody publishes is refused after one more read.
        assert_refused(await client.get(PROTECTED, headers=bearer(new.token(kid="made-up"))))


async def test_unknown_key_ids_read_the_jwks_at_most_once_per_interval(tmp_path: Path, idp: Provider) -> None:
    key = idp.keys[0]
    async with app_with(tmp_path, JwtAuthenticator(jwks_settings(idp), refetch_interval=3600)) as client:
        assert (await client.get(PROTECTED, headers=bearer(key.token()))).status_code == 200
        for kid in ("a", "b", "c"):
            assert_refused(await client.get(PROTECTED, headers=bearer(key.token(kid=kid))))
        assert idp.jwks_reads == 1


async def test_a_failure_is_audited_with_its_reason_and_request_id_never_the_token(
    tmp_path: Path, idp: Provider, caplog: pytest.LogCaptureFixture
) -> None:
    token = idp.keys[0].token(aud="someone-else")
    async with app_with(tmp_path, JwtAuthenticator(jwks_settings(idp))) as client:
        with caplog.at_level(logging.INFO, logger="ferryman.audit"):
            await client.get(PROTECTED, headers={**bearer(token), "X-Request-ID": "req-42"})
    [record] = [r for r in caplog.records if r.name == "ferryman.audit"]
    assert (record.event, record.principal, record.action, record.resource, record.request_id) == (  # type: ignore[attr-defined]
        "authentication_failed",
        None,
        "read",  # the action a GET asks for, as every audit record names it
        PROTECTED,
        "req-42",
    )
    assert "audience" in record.reason.lower()  # type: ignore[attr-defined]
    assert all(token not in r.getMessage() and token not in str(r.__dict__) for r in caplog.records)


async def test_introspected_tokens_are_active_ones_and_answers_are_cached(tmp_path: Path, idp: Provider) -> None:
    idp.active["opaque-1"] = {"sub": "bob", "groups": ["ml"], "exp": int(time.time()) + 600}
    settings = OAuth2TokenSettings(
        introspection={"url": idp.introspection_url, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    )
    async with app_with(tmp_path, IntrospectionAuthenticator(settings)) as client:
        assert (await client.get(PROTECTED, headers=bearer("opaque-1"))).status_code == 200
        assert (await client.get(PROTECTED, headers=bearer("opaque-1"))).status_code == 200
        assert idp.introspections == 1
        assert_refused(await client.get(PROTECTED, headers=bearer("opaque-2")))
    wrong_client = OAuth2TokenSettings(
        introspection={"url": idp.introspection_url, "client_id": CLIENT_ID, "client_secret": "wrong"}
    )
    async with app_with(tmp_path, IntrospectionAuthenticator(wrong_client)) as client:
        assert_refused(await client.get(PROTECTED, headers=bearer("opaque-1")))


async def test_claims_map_to_the_principal_the_request_runs_as(idp: Provider) -> None:
    settings = AuthSettings.model_validate(
        {"provider_type": "oauth2_token", "config": {"jwks": {"uri": idp.jwks_uri}, "audience": AUDIENCE}}
    )
    assert settings.provider_config is not None
    token = idp.keys[0].token(groups=["ml", "ops"], roles="admin dev", tenant="acme")
    principal = await JwtAuthenticator(settings.provider_config).authenticate(token)
    assert principal.id == "alice"
    assert principal.values("roles") == ("alice", "admin", "dev")  # sub -> roles is Llama Stack's default
    assert principal.values("teams") == ("ml", "ops")
    assert principal.values("namespaces") == ("acme",)


async def test_an_introspected_token_for_another_audience_or_issuer_is_refused(tmp_path: Path, idp: Provider) -> None:
    later = int(time.time()) + 600
    idp.active["ours"] = {"sub": "bob", "aud": ["other", "ferryman"], "iss": "https://idp", "exp": later}
    idp.active["theirs"] = {"sub": "bob", "aud": "billing-api", "exp": later}
    idp.active["elsewhere"] = {"sub": "bob", "aud": "ferryman", "iss": "https://rogue", "exp": later}
    settings = OAuth2TokenSettings(
        introspection={"url": idp.introspection_url, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET},
        audience="ferryman",
        issuer="https://idp",
    )
    async with app_with(tmp_path, IntrospectionAuthenticator(settings)) as client:
        assert (await client.get(PROTECTED, headers=bearer("ours"))).status_code == 200
        assert_refused(await client.get(PROTECTED, headers=bearer("theirs")))
        assert_refused(await client.get(PROTECTED, headers=bearer("elsewhere")))
