"""API keys: made, listed and revoked with ``ferryman keys`` (a real process), used over HTTP on two replicas."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx
import pytest
from replicas import postgres_database

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.server.app import build_services
from ferryman.storage.base import Store
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.sql.postgres import PostgresStore
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script
from inprocess import scripted_provider, serving

pytestmark = pytest.mark.anyio

PROTECTED = "/v1/agents"


@pytest.fixture()
def database() -> Iterator[str]:
    with postgres_database() as url:
        yield url


async def keys(*argv: str) -> subprocess.CompletedProcess[str]:
    """``ferryman keys …`` in its own process."""
    command = [sys.executable, "-m", "ferryman.cli.main", "keys", *argv]
    return await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=60, check=False)


@asynccontextmanager
async def replica(store: Store, api_keys: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    authenticator = BearerAuthenticator(ApiKeyAuthenticator(ApiKeys(store.kernel)) if api_keys else None, None)
    services = build_services(store, [scripted_provider(Script())], authenticator=authenticator)
    async with serving(services) as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_key_works_on_every_replica_until_revoked_there_all_at_once(database: str) -> None:
    created = await keys("create", "--name", "ci-bot", "--role", "admin", "--team", "ml", "--db", database)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert key.startswith("fm_") and len(key) > 40 and "shown only now" in created.stderr
    assert (await keys("create", "--name", "ci-bot", "--db", database)).returncode == 2

    listed = await keys("list", "--db", database)
    assert listed.returncode == 0 and key not in listed.stdout
    assert "ci-bot" in listed.stdout and "active" in listed.stdout and "roles=admin teams=ml" in listed.stdout

    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(replica(PostgresStore(database))) for _ in range(2)]
        for client in clients:
            assert (await client.get(PROTECTED, headers=bearer(key))).status_code == 200
        revoked = await keys("revoke", "ci-bot", "--db", database)
        assert revoked.returncode == 0, revoked.stderr
        for client in clients:
            assert (await client.get(PROTECTED, headers=bearer(key))).status_code == 401
    assert "revoked" in (await keys("list", "--db", database)).stdout
    assert (await keys("revoke", "nobody", "--db", database)).returncode == 1


async def test_unknown_keys_and_keys_when_keys_are_off_are_refused(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "keys.db"))
    key = new_key()
    async with replica(store) as client:
        await ApiKeys(store.kernel).create(key_record("bot", key, {"roles": ["dev"], "teams": ["ml"]}))
        assert (await client.get(PROTECTED, headers=bearer(key))).status_code == 200
        assert await ApiKeyAuthenticator(ApiKeys(store.kernel)).authenticate(key) == Principal(
            PrincipalKind.API_KEY, "bot", {"roles": ("dev",), "teams": ("ml",)}
        )
        assert (await client.get(PROTECTED, headers=bearer(new_key()))).status_code == 401
    async with replica(SqliteStore(str(tmp_path / "keys.db")), api_keys=False) as client:
        response = await client.get(PROTECTED, headers=bearer(key))
        assert response.status_code == 401 and "www-authenticate" in response.headers
