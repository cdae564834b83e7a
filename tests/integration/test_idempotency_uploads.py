"""``Idempotency-Key`` on an upload: a client sending the same upload again encodes a new multipart body, with a
new random boundary; it is the same request, and gets the first file."""

from __future__ import annotations

from pathlib import Path

import pytest
from knowledge_serving import knowledge_app

pytestmark = pytest.mark.anyio


async def test_the_same_upload_sent_again_with_its_key_gets_the_first_file(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, _):
        files = {"file": ("a.txt", b"hello")}
        data = {"purpose": "assistants"}
        headers = {"Idempotency-Key": "upload"}
        first = await http.post("/v1/files", files=files, data=data, headers=headers)
        assert first.status_code == 200, first.text
        again = await http.post("/v1/files", files=files, data=data, headers=headers)  # a new boundary
        assert again.status_code == 200, again.text
        assert again.json() == first.json() and again.headers.get("idempotent-replayed") == "true"
        assert len((await http.get("/v1/files")).json()["data"]) == 1
