"""An API key and an identity provider's subject never share a namespace, whatever a token's ``sub`` says.

The server accepts both (API keys and JWTs signed by the local JWKS stand-in);
the API key ``alice`` and tokens whose subject is ``key:alice`` (the form
earlier versions gave the key's principal) or ``alice`` are three callers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from auth_support import AUDIENCE, ISSUER, Provider, identity_provider

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.jwt_tokens import JwtAuthenticator
from ferryman.auth_settings import OAuth2TokenSettings
from ferryman.server.app import build_services
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script
from inprocess import scripted_provider, serving

pytestmark = pytest.mark.anyio

AGENT = {"agent_config": {"model": "scripted-model", "instructions": "be brief"}}
SECRET = b"alice's notes"


@pytest.fixture()
def idp() -> Iterator[Provider]:
    with identity_provider() as provider:
        yield provider


@asynccontextmanager
async def server(tmp_path: Path, idp: Provider) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    """The server, and the API key ``alice``'s headers."""
    store = SqliteStore(str(tmp_path / "typed.db"))
    tokens = JwtAuthenticator(OAuth2TokenSettings(jwks={"uri": idp.jwks_uri}, issuer=ISSUER, audience=AUDIENCE))
    authenticator = BearerAuthenticator(ApiKeyAuthenticator(ApiKeys(store.kernel)), tokens)
    services = build_services(store, [scripted_provider(Script())], sole_process=True, authenticator=authenticator)
    async with serving(services) as client:
        key = new_key()
        await ApiKeys(store.kernel).create(key_record("alice", key, {}))
        yield client, bearer(key)


def bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


async def own_records(client: httpx.AsyncClient, headers: dict[str, str]) -> tuple[str, str]:
    """An agent and a file of the caller's; their ids."""
    agent = await client.post("/v1/agents", json=AGENT, headers=headers)
    assert agent.status_code == 200, agent.text
    upload = await client.post(
        "/v1/files", data={"purpose": "assistants"}, files={"file": ("n.txt", SECRET, "text/plain")}, headers=headers
    )
    assert upload.status_code == 200, upload.text
    return agent.json()["agent_id"], upload.json()["id"]


async def assert_unseen(client: httpx.AsyncClient, headers: dict[str, str], agent_id: str, file_id: str) -> None:
    for path in (f"/v1/agents/{agent_id}", f"/v1/files/{file_id}", f"/v1/files/{file_id}/content"):
        response = await client.get(path, headers=headers)
        assert response.status_code == 404, (path, response.text)
        assert SECRET not in response.content
    assert agent_id not in (await client.get("/v1/agents", headers=headers)).text
    assert file_id not in (await client.get("/v1/files", headers=headers)).text


@pytest.mark.parametrize("subject", ["key:alice", "alice"])
async def test_a_token_cannot_reach_what_the_api_key_of_its_subject_owns(
    tmp_path: Path, idp: Provider, subject: str
) -> None:
    async with server(tmp_path, idp) as (client, alice_key):
        agent_id, file_id = await own_records(client, alice_key)
        await assert_unseen(client, bearer(idp.keys[0].token(sub=subject)), agent_id, file_id)
        content = await client.get(f"/v1/files/{file_id}/content", headers=alice_key)
        assert (content.status_code, content.content) == (200, SECRET)


@pytest.mark.parametrize("subject", ["key:alice", "alice"])
async def test_the_api_key_cannot_reach_what_a_token_of_its_name_owns(
    tmp_path: Path, idp: Provider, subject: str
) -> None:
    async with server(tmp_path, idp) as (client, alice_key):
        token = bearer(idp.keys[0].token(sub=subject))
        agent_id, file_id = await own_records(client, token)
        await assert_unseen(client, alice_key, agent_id, file_id)
        assert (await client.get(f"/v1/agents/{agent_id}", headers=token)).status_code == 200


async def test_an_idempotency_key_of_the_api_key_is_not_replayed_to_a_token(tmp_path: Path, idp: Provider) -> None:
    async with server(tmp_path, idp) as (client, alice_key):
        once = {"Idempotency-Key": "create-agent-1"}
        first = await client.post("/v1/agents", json=AGENT, headers=alice_key | once)
        token = bearer(idp.keys[0].token(sub="key:alice"))
        again = await client.post("/v1/agents", json=AGENT, headers=token | once)
        assert again.status_code == 200 and "idempotent-replayed" not in again.headers
        assert again.json()["agent_id"] != first.json()["agent_id"]
