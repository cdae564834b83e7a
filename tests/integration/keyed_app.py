"""An in-process app over a fresh store of one backend, with API keys on, and a key for each of some callers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from storage_backends import unopened_store

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.server.app import Services, build_services
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.testing import ScriptedModel
from inprocess import serving


@asynccontextmanager
async def keyed_app(
    backend: str, tmp_path: Path, model: ScriptedModel, names: tuple[str, ...], **settings: Any
) -> AsyncIterator[tuple[Services, httpx.AsyncClient, dict[str, dict[str, str]]]]:
    """The services, a client of the running app, and each name's ``Authorization`` header.

    ``settings`` go to ``build_services`` as they are.
    """
    async with unopened_store(backend, tmp_path) as store:
        keys = ApiKeys(store.kernel)
        authenticator = BearerAuthenticator(ApiKeyAuthenticator(keys), None)
        services = build_services(store, [model], authenticator=authenticator, **settings)
        async with serving(services) as http:
            bearer = {}
            for name in names:
                key = new_key()
                await keys.create(key_record(name, key, {}))
                bearer[name] = {"Authorization": f"Bearer {key}"}
            yield services, http, bearer


async def answered(
    http: httpx.AsyncClient, method: str, url: str, headers: dict[str, str], status: int, **kw: Any
) -> Any:
    """The JSON answer of a request that must answer ``status``."""
    answer = await http.request(method, url, headers=headers, **kw)
    assert answer.status_code == status, answer.text
    return answer.json()
