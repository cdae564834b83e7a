"""The Files and Vector Stores APIs driven with the real ``openai`` SDK: every call parses, polling ends, search finds.

Each test gets its own app over SQLite with the offline embedding model (its
weights load once per process). The SDK's own ``*_and_poll`` helpers wait for
ingestion, as a client would.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from pypdf import PdfWriter
from pypdf.generic import ContentStream, DictionaryObject, NameObject
from starlette.testclient import TestClient

from ferryman.inference.local_embeddings import LocalEmbeddingProvider, local_embeddings_available
from ferryman.knowledge.blobs import LocalBlobStore
from ferryman.server.app import Services, build_services, create_app
from ferryman.storage.sql.sqlite import SqliteStore
from inprocess import BASE_URL, migrated_sqlite

pytestmark = pytest.mark.skipif(not local_embeddings_available(), reason="all-MiniLM-L6-v2 is not installed")

POLL_MS = 20
RIVER = (
    "Ferrymen carry passengers across rivers. The toll is paid in silver coins before the crossing. "
    "In winter the river freezes and the ferry rests in its shed until the ice breaks in spring. "
) * 12
DOCS: dict[str, tuple[str, dict[str, str | float | bool]]] = {
    "cats.txt": ("Cats are small carnivorous mammals that purr and chase mice.", {"animal": "cat", "year": 2023}),
    "dogs.txt": ("Dogs are loyal companions; they bark and fetch sticks.", {"animal": "dog", "year": 2024}),
    "tea.txt": ("Green tea is brewed from the leaves of Camellia sinensis.", {"topic": "drink", "year": 2025}),
}


@dataclass
class App:
    """The app's services and the SDK on it."""

    http: TestClient
    services: Services
    oai: openai.OpenAI


@pytest.fixture()
def app(tmp_path: Path) -> Iterator[App]:
    """A fresh app with local embeddings and files on disk, and the SDK on it (never retrying)."""
    store = SqliteStore(migrated_sqlite(tmp_path / "knowledge.db"))
    services = build_services(
        store, [LocalEmbeddingProvider()], sole_process=True, blobs=LocalBlobStore(tmp_path / "files")
    )
    with TestClient(create_app(services), base_url=BASE_URL) as http:
        transport = httpx2.MockTransport(lambda request: http.send(request, stream=True))
        client = httpx2.Client(transport=transport, base_url=BASE_URL)
        with openai.OpenAI(
            base_url=f"{BASE_URL}/v1", http_client=client, api_key="unused", max_retries=0, timeout=60
        ) as oai:
            yield App(http, services, oai)


def text_pdf(lines: list[str]) -> bytes:
    """A one-page PDF with a text layer holding ``lines`` (Helvetica, one line each)."""
    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
    )
    stream = ContentStream(None, writer)
    stream.set_data(
        "".join(f"BT /F1 12 Tf 72 {720 - 16 * i} Td ({line}) Tj ET\n" for i, line in enumerate(lines)).encode()
    )
    page.replace_contents(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _kb(oai: openai.OpenAI) -> tuple[str, dict[str, str]]:
    """A store of :data:`DOCS`, each file with its attributes, ingested (one batch, polled to its end)."""
    ids = {
        name: oai.files.create(file=(name, text.encode()), purpose="assistants").id for name, (text, _) in DOCS.items()
    }
    store = oai.vector_stores.create(name="kb")
    files: Any = [{"file_id": ids[name], "attributes": attributes} for name, (_, attributes) in DOCS.items()]
    batch = oai.vector_stores.file_batches.create_and_poll(store.id, files=files, poll_interval_ms=POLL_MS)
    assert batch.status == "completed" and batch.file_counts.completed == 3
    return store.id, ids


def test_files_are_uploaded_listed_paged_read_and_deleted(app: App) -> None:
    oai = app.oai
    first = oai.files.create(file=("one.txt", b"first file"), purpose="assistants")
    second = oai.files.create(file=("two.txt", b"second file"), purpose="assistants")
    data = oai.files.create(file=("rows.jsonl", b'{"a": 1}\n'), purpose="user_data")
    assert (
        first.object == "file" and first.filename == "one.txt" and first.bytes == 10 and first.purpose == "assistants"
    )

    assert {f.id for f in oai.files.list()} == {first.id, second.id, data.id}
    assert [f.id for f in oai.files.list(purpose="user_data")] == [data.id]
    oldest_first = [f.id for f in oai.files.list(purpose="assistants", order="asc")]
    newest_first = [f.id for f in oai.files.list(purpose="assistants", order="desc")]
    assert set(oldest_first) == {first.id, second.id} and oldest_first == newest_first[::-1]
    page = oai.files.list(limit=1, order="asc")
    assert len(page.data) == 1 and page.has_more
    assert [f.id for f in page] == [f.id for f in oai.files.list(order="asc")]  # the SDK follows the cursor

    assert oai.files.retrieve(first.id) == first
    assert oai.files.content(first.id).read() == b"first file"
    deleted = oai.files.delete(first.id)
    assert deleted.deleted and deleted.id == first.id
    with pytest.raises(openai.NotFoundError):
        oai.files.retrieve(first.id)
    with pytest.raises(openai.BadRequestError):
        oai.files.create(file=("empty.txt", b""), purpose="assistants")


def test_a_store_is_created_with_static_chunks_read_listed_updated_and_deleted(app: App) -> None:
    oai = app.oai
    file = oai.files.create(file=("river.txt", RIVER.encode()), purpose="assistants")
    strategy: Any = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 20}}
    store = oai.vector_stores.create(name="river", file_ids=[file.id], chunking_strategy=strategy)
    assert store.object == "vector_store" and store.name == "river"

    attached = oai.vector_stores.files.poll(file.id, vector_store_id=store.id, poll_interval_ms=POLL_MS)
    assert attached.status == "completed" and attached.last_error is None
    assert attached.chunking_strategy is not None and attached.chunking_strategy.type == "static"
    chunks = list(oai.vector_stores.files.content(file.id, vector_store_id=store.id))
    assert len(chunks) > 2 and all(chunk.type == "text" and chunk.text for chunk in chunks)

    done = oai.vector_stores.retrieve(store.id)
    assert done.status == "completed" and done.file_counts.completed == 1 and done.usage_bytes > 0
    assert [s.id for s in oai.vector_stores.list()] == [store.id]
    updated = oai.vector_stores.update(
        store.id, name="renamed", metadata={"team": "docs"}, expires_after={"anchor": "last_active_at", "days": 3}
    )
    assert updated.name == "renamed" and updated.metadata == {"team": "docs"}
    assert updated.expires_after is not None and updated.expires_after.days == 3
    assert updated.last_active_at is not None and updated.expires_at == updated.last_active_at + 3 * 86400

    deleted = oai.vector_stores.delete(store.id)
    assert deleted.deleted and deleted.object == "vector_store.deleted"
    with pytest.raises(openai.NotFoundError):
        oai.vector_stores.retrieve(store.id)
    assert oai.files.retrieve(file.id).id == file.id


def test_a_store_s_files_are_attached_listed_updated_read_and_detached(app: App) -> None:
    oai = app.oai
    store = oai.vector_stores.create(name="files")
    one = oai.files.create(file=("one.txt", RIVER.encode()), purpose="assistants")
    attached = oai.vector_stores.files.create_and_poll(
        one.id, vector_store_id=store.id, attributes={"year": 2024, "draft": True}, poll_interval_ms=POLL_MS
    )
    assert attached.status == "completed" and attached.attributes == {"year": 2024, "draft": True}

    assert [f.id for f in oai.vector_stores.files.list(store.id, filter="completed")] == [one.id]
    assert list(oai.vector_stores.files.list(store.id, filter="failed")) == []
    assert oai.vector_stores.files.retrieve(one.id, vector_store_id=store.id).usage_bytes > 0
    changed = oai.vector_stores.files.update(one.id, vector_store_id=store.id, attributes={"year": 2025})
    assert changed.attributes == {"year": 2025}
    text = " ".join(c.text or "" for c in oai.vector_stores.files.content(one.id, vector_store_id=store.id))
    assert "silver coins" in text

    detached = oai.vector_stores.files.delete(one.id, vector_store_id=store.id)
    assert detached.deleted and detached.id == one.id
    with pytest.raises(openai.NotFoundError):
        oai.vector_stores.files.retrieve(one.id, vector_store_id=store.id)
    assert oai.vector_stores.retrieve(store.id).file_counts.total == 0


def test_file_batches_are_polled_listed_and_cancelled(app: App) -> None:
    oai = app.oai
    store = oai.vector_stores.create(name="batches")
    ids = [oai.files.create(file=(f"{n}.txt", RIVER.encode()), purpose="assistants").id for n in range(3)]
    batch = oai.vector_stores.file_batches.create_and_poll(
        store.id, file_ids=ids[:2], attributes={"batch": "first"}, poll_interval_ms=POLL_MS
    )
    assert batch.object == "vector_store.files_batch" and batch.status == "completed"
    assert batch.file_counts.completed == 2 and batch.file_counts.total == 2
    assert oai.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id).status == "completed"
    listed = oai.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)
    assert {f.id for f in listed} == set(ids[:2]) and all(f.attributes == {"batch": "first"} for f in listed)

    # With the worker stopped, the next batch stays in progress until it is cancelled.
    app.http.portal.call(app.services.ingestion.stop)  # type: ignore[union-attr]
    pending = oai.vector_stores.file_batches.create(store.id, file_ids=[ids[2]])
    assert pending.status == "in_progress" and pending.file_counts.in_progress == 1
    cancelled = oai.vector_stores.file_batches.cancel(pending.id, vector_store_id=store.id)
    assert cancelled.status == "cancelled" and cancelled.file_counts.cancelled == 1
    statuses = [f.status for f in oai.vector_stores.file_batches.list_files(pending.id, vector_store_id=store.id)]
    assert statuses == ["cancelled"]


def test_search_with_strings_lists_filters_thresholds_and_rewrites(app: App) -> None:
    oai = app.oai
    store_id, ids = _kb(oai)

    found = oai.vector_stores.search(store_id, query="animal that purrs")
    assert found.data[0].file_id == ids["cats.txt"] and found.data[0].filename == "cats.txt"
    assert found.data[0].attributes == {"animal": "cat", "year": 2023}
    assert all(0.0 <= hit.score <= 1.0 for hit in found.data)
    assert "purr" in found.data[0].content[0].text and found.data[0].content[0].type == "text"

    several = oai.vector_stores.search(store_id, query=["purring cats", "brewing green tea"], max_num_results=2)
    assert {hit.file_id for hit in several.data} == {ids["cats.txt"], ids["tea.txt"]}

    dogs = oai.vector_stores.search(store_id, query="pets", filters={"type": "eq", "key": "animal", "value": "dog"})
    assert [hit.file_id for hit in dogs.data] == [ids["dogs.txt"]]
    compound: Any = {
        "type": "or",
        "filters": [
            {"type": "eq", "key": "topic", "value": "drink"},
            {
                "type": "and",
                "filters": [
                    {"type": "gte", "key": "year", "value": 2023},
                    {"type": "ne", "key": "animal", "value": "dog"},
                ],
            },
        ],
    }
    either = oai.vector_stores.search(store_id, query="anything", filters=compound)
    assert {hit.file_id for hit in either.data} == {ids["cats.txt"], ids["tea.txt"]}

    scores = [hit.score for hit in oai.vector_stores.search(store_id, query="green tea leaves", max_num_results=3).data]
    threshold = (scores[0] + scores[-1]) / 2
    strict = oai.vector_stores.search(
        store_id, query="green tea leaves", ranking_options={"score_threshold": threshold}, max_num_results=3
    )
    assert strict.data and all(hit.score >= threshold for hit in strict.data) and len(strict.data) < len(scores)

    rewritten = oai.vector_stores.search(store_id, query="What do you know about the Dogs?", rewrite_query=True)
    assert rewritten.data[0].file_id == ids["dogs.txt"]
    assert rewritten.model_extra is not None and rewritten.model_extra["search_query"] == ["dogs"]
    with pytest.raises(openai.BadRequestError):
        no_value: Any = {"type": "eq", "key": "animal"}
        oai.vector_stores.search(store_id, query="x", filters=no_value)


def test_a_pdf_is_uploaded_ingested_and_found(app: App) -> None:
    oai = app.oai
    pdf = text_pdf(["The lighthouse keeper logs every passing ship.", "Fog horns sound twice a minute in fog."])
    uploaded = oai.files.create(file=("keeper.pdf", pdf, "application/pdf"), purpose="assistants")
    other = oai.files.create(file=("river.txt", RIVER.encode()), purpose="assistants")
    store = oai.vector_stores.create(name="pdf")
    batch = oai.vector_stores.file_batches.create_and_poll(
        store.id, file_ids=[uploaded.id, other.id], poll_interval_ms=POLL_MS
    )
    assert batch.file_counts.completed == 2, batch

    found = oai.vector_stores.search(store.id, query="who records the ships passing the lighthouse?")
    assert found.data[0].file_id == uploaded.id and found.data[0].filename == "keeper.pdf"
    assert "lighthouse keeper" in found.data[0].content[0].text
