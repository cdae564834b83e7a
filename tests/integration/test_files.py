"""The Files API: upload, list, get, content, delete; bad uploads are refused with a clear 400."""

from __future__ import annotations

from pathlib import Path

import pytest
from knowledge_serving import knowledge_app, upload

pytestmark = pytest.mark.anyio


async def test_a_file_is_uploaded_listed_read_and_deleted(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, _):
        first = await upload(http, "notes.txt", b"hello world")
        second = await upload(http, "data.jsonl", b'{"a": 1}\n', purpose="batch")
        assert first["object"] == "file" and first["bytes"] == 11 and first["filename"] == "notes.txt"
        assert first["id"].startswith("file-") and first["purpose"] == "assistants"
        assert (await http.get(f"/v1/files/{first['id']}")).json() == first
        listed = (await http.get("/v1/files")).json()
        newest_first = [f["id"] for f in listed["data"]]
        assert set(newest_first) == {first["id"], second["id"]}
        ascending = (await http.get("/v1/files", params={"order": "asc", "limit": 1})).json()
        assert [f["id"] for f in ascending["data"]] == newest_first[-1:] and ascending["has_more"]
        batch = (await http.get("/v1/files", params={"purpose": "batch"})).json()
        assert [f["id"] for f in batch["data"]] == [second["id"]]
        content = await http.get(f"/v1/files/{first['id']}/content")
        assert content.content == b"hello world" and content.headers["content-type"].startswith("text/plain")
        deleted = (await http.delete(f"/v1/files/{first['id']}")).json()
        assert deleted == {"id": first["id"], "object": "file", "deleted": True}
        assert (await http.get(f"/v1/files/{first['id']}")).status_code == 404
        assert (await http.get(f"/v1/files/{first['id']}/content")).status_code == 404
        assert not (tmp_path / "files" / first["id"]).exists()


async def test_bad_uploads_are_refused(tmp_path: Path) -> None:
    from ferryman.file_settings import FileSettings

    async with knowledge_app(tmp_path, files=FileSettings(max_bytes=100)) as (http, _):
        cases = [
            ({"file": ("a.txt", b"", "text/plain")}, {"purpose": "assistants"}, "empty"),
            ({"file": ("a.txt", b"x", "text/plain")}, {"purpose": "nonsense"}, "purpose"),
            ({"file": ("a.txt", b"x", "text/plain")}, {}, "purpose"),
            (None, {"purpose": "assistants"}, "file"),
        ]
        for files, data, said in cases:
            answer = await http.post("/v1/files", files=files, data=data)
            assert answer.status_code == 400, (said, answer.text)
            assert said in answer.json()["error"]["message"] if "error" in answer.json() else said in answer.text
        too_large = await http.post("/v1/files", files={"file": ("a.txt", b"x" * 101)}, data={"purpose": "assistants"})
        assert too_large.status_code == 413 and too_large.json()["error"]["code"] == "payload_too_large"
        assert "larger than the limit of 100 bytes" in too_large.json()["error"]["message"]
        json_body = await http.post("/v1/files", json={"purpose": "assistants"})
        assert json_body.status_code == 400
        assert (await http.get("/v1/files")).json()["data"] == []
        assert (await http.get("/v1/files/../../etc/passwd")).status_code == 404
        assert (await http.get("/v1/files/file-nope")).status_code == 404
        assert (await http.delete("/v1/files/file-nope")).status_code == 404
