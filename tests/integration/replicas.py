"""Shared state for replica tests: a fresh PostgreSQL database, a Redis, and ferryman processes over them.

The URLs come from ``FERRYMAN_TEST_POSTGRES_URL`` and ``FERRYMAN_TEST_REDIS_URL``;
an unreachable server skips these tests, except under ``CI=true``, where it fails them.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import redis
from storage_backends import POSTGRES_URL, unavailable

from support import Proc, ferryman_proc

REDIS_URL = os.environ.get("FERRYMAN_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
LEASE_SECONDS = 2.0
"""Short, so that a crashed replica's turn is failed quickly; the beat renews it every 2/3 s."""


async def _admin(statement: str) -> None:
    connection = await asyncpg.connect(POSTGRES_URL, timeout=5)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


@contextmanager
def postgres_database() -> Iterator[str]:
    """The URL of a new, empty database on the test server, dropped afterwards."""
    name = f"ferryman_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError) as exc:
        unavailable(f"PostgreSQL is unreachable at {POSTGRES_URL} (set FERRYMAN_TEST_POSTGRES_URL): {exc!r}")
    try:
        parts = urlsplit(POSTGRES_URL)
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def redis_url() -> str:
    """The test Redis, checked to answer."""
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        unavailable(f"Redis is unreachable at {REDIS_URL} (set FERRYMAN_TEST_REDIS_URL): {exc!r}")
    finally:
        client.close()
    return REDIS_URL


@contextmanager
def redis_database() -> Iterator[str]:
    """A ``redis://`` URL whose keys (records or streams) live under a new prefix, deleted afterwards."""
    prefix = f"replicas_{uuid.uuid4().hex[:12]}:"
    url = redis_url()
    try:
        yield f"{url}?prefix={prefix}"
    finally:
        client = redis.Redis.from_url(url)
        try:
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


@contextmanager
def shared_state(kind: str) -> Iterator[tuple[str, str]]:
    """``--db`` and ``--redis`` URLs of a fresh deployment: records in PostgreSQL or in Redis."""
    with redis_database() as redis_db:
        if kind == "postgres":
            with postgres_database() as db_url:
                yield db_url, redis_db
        else:
            yield redis_db, redis_db


def replicas(
    count: int, tmp: Path, inference_root: str, db_url: str, coordination: str, *extra: str
) -> list[tuple[Proc, str]]:
    """``count`` ferryman replicas over the shared state, started at once (each start takes seconds)."""
    options = ("--redis", coordination, "--turn-lease", str(LEASE_SECONDS), *extra)
    started = [ferryman_proc(tmp, inference_root, db_url, *options) for _ in range(count)]
    try:
        for proc, _ in started:
            proc.launch()
        for proc, _ in started:
            proc.wait_healthy()
    except BaseException:
        for proc, _ in started:
            proc.stop()
        raise
    return started
