"""A PostgreSQL role that may not create the vector extension is told, at open, that an administrator must."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from storage_backends import POSTGRES_URL

from ferryman.errors import ConfigurationError
from ferryman.storage.sql.postgres import PostgresStore

pytestmark = pytest.mark.anyio


@pytest.fixture()
async def unprivileged_url() -> AsyncIterator[str]:
    """A fresh database without the extension, and a role that may connect to it but not create extensions."""
    name = f"ferryman_noext_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(POSTGRES_URL)
    try:
        await admin.execute(f'CREATE ROLE "{name}" LOGIN')
        await admin.execute(f'CREATE DATABASE "{name}"')
        parts = urlsplit(POSTGRES_URL)
        netloc = f"{name}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        yield urlunsplit((parts.scheme, netloc, f"/{name}", parts.query, ""))
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'DROP ROLE IF EXISTS "{name}"')
        await admin.close()


async def test_a_role_without_the_privilege_gets_a_configuration_error_naming_the_fix(unprivileged_url: str) -> None:
    store = PostgresStore(unprivileged_url)
    with pytest.raises(ConfigurationError, match=r"an administrator must run 'CREATE EXTENSION vector;'"):
        await store.open()
