"""Two callers registering the same vector DB id at once: the record stays its creator's, never the loser's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from knowledge_serving import _Shared, needs_model
from tests.inprocess import migrated_sqlite, serving

from ferryman.api.vector_io import RegisterVectorDbRequest
from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.errors import ConflictError, NotFoundError
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore

pytestmark = [pytest.mark.anyio, needs_model]

ALICE, BOB = Principal(PrincipalKind.SUBJECT, "alice"), Principal(PrincipalKind.SUBJECT, "bob")


async def test_the_loser_of_a_concurrent_registration_owns_nothing(tmp_path: Path) -> None:
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "race.db")), [_Shared()])
    async with serving(services):
        request = RegisterVectorDbRequest(vector_db_id="shared-name", embedding_model="all-MiniLM-L6-v2")

        async def register(who: Principal) -> Principal | None:
            with acting_as(who):
                try:
                    await services.vector_dbs.register(request)
                except ConflictError:
                    return None
                return who

        winners = [w for w in await asyncio.gather(register(ALICE), register(BOB)) if w is not None]
        assert len(winners) == 1
        loser = BOB if winners[0] is ALICE else ALICE
        with acting_as(winners[0]):
            assert (await services.vector_dbs.get("shared-name")).identifier == "shared-name"
        with acting_as(loser), pytest.raises(NotFoundError):
            await services.vector_dbs.get("shared-name")
