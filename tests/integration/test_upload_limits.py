"""Uploads over the size limit are answered 413: before the body is read when its declared length says so,
while it arrives otherwise, with nothing read (or spooled) past the limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from knowledge_serving import knowledge_app

from ferryman.file_settings import FileSettings
from ferryman.server.body_limit import FORM_OVERHEAD

pytestmark = pytest.mark.anyio

LIMIT = 1000
DECLARED = 50 * 1024 * 1024
CHUNK = 65536


async def test_a_declared_oversized_upload_is_refused_before_its_body_is_read(tmp_path: Path) -> None:
    sent: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        head = b'--b\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n\r\n'
        yield head
        sent.append(len(head))
        for _ in range(DECLARED // 65536):
            yield b"x" * 65536
            sent.append(65536)

    async with knowledge_app(tmp_path, files=FileSettings(max_bytes=LIMIT)) as (http, _):
        headers = {"content-type": "multipart/form-data; boundary=b", "content-length": str(DECLARED)}
        answer = await http.post("/v1/files", content=body(), headers=headers)
        assert answer.status_code == 413
        assert answer.json()["error"] == {
            "code": "payload_too_large",
            "message": f"the file is larger than the limit of {LIMIT} bytes (files.max_bytes)",
            "field": "file",
        }
        assert sum(sent) < 1024 * 1024  # at most what the transport pulled ahead, never the 50 MB declared
        assert (await http.get("/v1/files")).json()["data"] == []


async def test_an_upload_without_content_length_is_refused_once_it_passes_the_limit(tmp_path: Path) -> None:
    sent: list[int] = []

    async def body() -> AsyncIterator[bytes]:  # httpx sends it chunked: no Content-Length
        head = b'--b\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n\r\n'
        sent.append(len(head))
        yield head
        for _ in range(DECLARED // CHUNK):
            sent.append(CHUNK)
            yield b"x" * CHUNK

    limit = 256 * 1024
    async with knowledge_app(tmp_path, files=FileSettings(max_bytes=limit)) as (http, _):
        answer = await http.post(
            "/v1/files", content=body(), headers={"content-type": "multipart/form-data; boundary=b"}
        )
        assert answer.status_code == 413, answer.text
        assert (
            answer.json()["error"]["message"] == f"the file is larger than the limit of {limit} bytes (files.max_bytes)"
        )
        # Read up to the limit (and the form's room), to the one chunk that passed it: never the 50 MB sent.
        assert sum(sent) <= limit + FORM_OVERHEAD + CHUNK
        assert (await http.get("/v1/files")).json()["data"] == []


async def test_an_oversized_file_in_a_small_enough_form_is_refused_too(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path, files=FileSettings(max_bytes=LIMIT)) as (http, _):
        files = {"file": ("big.txt", b"x" * (LIMIT + 1), "text/plain")}
        answer = await http.post("/v1/files", files=files, data={"purpose": "assistants"})
        assert answer.status_code == 413 and answer.json()["error"]["code"] == "payload_too_large"
        exact = await http.post(
            "/v1/files", files={"file": ("ok.txt", b"x" * LIMIT, "text/plain")}, data={"purpose": "assistants"}
        )
        assert exact.status_code == 200, exact.text
