"""A create-response whose one write committed but whose answer was lost (a dropped connection, a cancellation
after COMMIT): nothing it stored is left behind, live for good, and a repeat of a keyed request runs again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ferryman.errors import NotFoundError
from ferryman.server.app import build_services
from ferryman.storage.base import ResponseStart
from ferryman.storage.sql.sqlite import SqliteStore
from inprocess import AskedModel, migrated_sqlite, serving

pytestmark = pytest.mark.anyio


class LosesTheAnswer(SqliteStore):
    """Commits the first start, then fails as a lost answer would."""

    started: ResponseStart | None = None

    async def start_response(self, start: ResponseStart, *args: Any, **kwargs: Any) -> None:
        await super().start_response(start, *args, **kwargs)
        if self.started is None:
            self.started = start
            raise ConnectionResetError("the answer was lost after COMMIT")


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
async def test_a_start_whose_answer_was_lost_leaves_nothing_stored(
    tmp_path: Path, scripted: AskedModel, keyed: bool, background: bool
) -> None:
    store = LosesTheAnswer(migrated_sqlite(tmp_path / "lost.db"))
    body = {"model": "scripted-model", "input": "hi", "background": background}
    headers = {"Idempotency-Key": "k"} if keyed else {}
    async with serving(build_services(store, [scripted])) as http:
        assert (await http.post("/v1/responses", json=body, headers=headers)).status_code == 500
        start = store.started
        assert start is not None
        raw = store
        with pytest.raises(NotFoundError):
            await raw.get_response(start.record.response.id)
        with pytest.raises(NotFoundError):
            await raw.get_turn_record(start.record.session_id, start.turn.turn_id)
        if keyed:  # its key was forgotten: the repeat runs
            scripted.enqueue_text("again")
            repeat = await http.post("/v1/responses", json=body, headers=headers)
            assert repeat.status_code == 200 and repeat.headers.get("idempotent-replayed") is None, repeat.text
