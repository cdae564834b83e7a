"""Extraction in a child process: the same text as in the server's process, limits that name their setting, no
process left behind, and the memory a large job freed handed back to the system."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import psutil  # type: ignore[import-untyped]
import pytest
from tests.unit.test_extract import pdf_with_text

from ferryman import heap
from ferryman.knowledge import isolated
from ferryman.knowledge.extract import UnreadableFile, extract_text
from ferryman.knowledge.isolated import ExtractionFailed, ExtractionLimits, extract_text_bounded

pytestmark = pytest.mark.anyio

PAGE = b"""<?xml version="1.0"?><html><head><title>The Title</title><style>p { color: red }</style></head>
<body><h1>Heading</h1><p>Hello <b>bold</b>&nbsp;world<br>next line</p>
<script>alert('hidden')</script><ul><li>one</li><li>two</li></ul></body></html>"""
DOCUMENTS = [
    ("page.html", PAGE),
    ("doc.pdf", pdf_with_text("First page text", "Second page text")),
    ("data.json", json.dumps({"title": "Ferry", "stops": [{"name": "North"}, "South"]}).encode()),
    ("rows.jsonl", b'{"a": 1}\n{"a": 2}\n'),
    ("ferries.csv", b'name,port\nAurora,"Oslo, Norway"\n'),
    ("t.tsv", b"a\tb\n1\t2\n"),
    ("notes.md", "# Café\n\nnaïve".encode()),
    ("quoted.txt", "café “quoted”".encode("cp1252")),
]


@pytest.mark.parametrize(("name", "data"), DOCUMENTS, ids=[name for name, _ in DOCUMENTS])
async def test_the_child_reads_each_kind_as_the_servers_process_would(name: str, data: bytes) -> None:
    assert await extract_text_bounded(data, name, None) == extract_text(data, name, None)


async def test_what_cannot_be_read_is_refused_as_in_the_servers_process() -> None:
    for name, data in (("broken.pdf", pdf_with_text("cut short")[:60]), ("bad.json", b"{not"), ("x.pptx", b"PK")):
        with pytest.raises(UnreadableFile) as expected:
            extract_text(data, name, None)
        with pytest.raises(UnreadableFile) as bounded:
            await extract_text_bounded(data, name, None)
        assert (bounded.value.code, bounded.value.message) == (expected.value.code, expected.value.message)


async def test_markup_past_the_memory_limit_fails_naming_the_limit_and_its_setting() -> None:
    with pytest.raises(UnreadableFile) as caught:
        await extract_text_bounded(b"<i>a</i>" * 500_000, "dense.html", None, ExtractionLimits(memory_mb=128))
    assert caught.value.code == "invalid_file"
    assert "more memory than the limit of 128 MB (files.extraction_memory_mb)" in caught.value.message


async def test_a_parse_past_the_time_limit_is_killed_naming_the_limit_and_its_setting() -> None:
    nested = b"<div>" * 100_000  # lexbor's tree building is quadratic in depth: about 20 s
    started = asyncio.get_running_loop().time()
    with pytest.raises(UnreadableFile) as caught:
        await extract_text_bounded(nested, "deep.html", None, ExtractionLimits(timeout_seconds=0.5))
    assert asyncio.get_running_loop().time() - started < 5
    assert "took longer than the limit of 0.5 s (files.extraction_timeout_seconds)" in caught.value.message


async def test_a_cancelled_extraction_leaves_no_process_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    started: asyncio.Queue[asyncio.subprocess.Process] = asyncio.Queue()
    spawn = asyncio.create_subprocess_exec

    async def spawned(*args: Any, **options: Any) -> asyncio.subprocess.Process:
        process = await spawn(*args, **options)
        started.put_nowait(process)
        return process

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spawned)
    task = asyncio.create_task(extract_text_bounded(b"<div>" * 100_000, "deep.html", None))
    process = await started.get()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert process.returncode is not None  # killed and reaped


async def test_a_child_that_fails_unexpectedly_is_a_server_error_not_an_unreadable_file() -> None:
    with pytest.raises(ExtractionFailed):
        await isolated._in_child("no such kind", b"data", ExtractionLimits())


def test_memory_freed_in_a_thread_goes_back_to_the_system() -> None:
    kept: list[bytes] = []

    def churn() -> None:
        # Blocks below glibc's mmap threshold come from this thread's arena; every sixteenth kept alive pins the
        # arena's top, so the freed ones stay resident until trimmed.
        blocks = [bytes([n % 251]) * (64 * 1024) for n in range(3200)]
        kept.extend(blocks[::16])

    worker = threading.Thread(target=churn)
    worker.start()
    worker.join()
    process = psutil.Process()
    before = process.memory_info().rss
    assert heap.release_freed_memory()
    assert before - process.memory_info().rss > 100 * 1024 * 1024
    assert len(kept) == 200
