"""The Vector Stores API: stores, attached files ingested in the background, batches, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from knowledge_serving import knowledge_app, needs_model, settled, upload

from ferryman.knowledge import ingest

pytestmark = [pytest.mark.anyio, needs_model]

TEXT = b"Ferrymen carry passengers across rivers.\n\nThe toll is paid in silver coins before the crossing."


async def test_a_store_is_created_with_files_ingested_read_updated_and_deleted(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        file = await upload(http, "river.txt", TEXT)
        created = await http.post("/v1/vector_stores", json={"name": "docs", "file_ids": [file["id"]]})
        assert created.status_code == 200, created.text
        store = created.json()
        assert store["object"] == "vector_store" and store["name"] == "docs"
        assert store["embedding_model"] == "all-MiniLM-L6-v2" and store["embedding_dimension"] == 384
        await settled(services)
        store = (await http.get(f"/v1/vector_stores/{store['id']}")).json()
        assert store["status"] == "completed" and store["file_counts"]["completed"] == 1 and store["usage_bytes"] > 0
        attached = (await http.get(f"/v1/vector_stores/{store['id']}/files/{file['id']}")).json()
        assert attached["status"] == "completed" and attached["last_error"] is None
        content = (await http.get(f"/v1/vector_stores/{store['id']}/files/{file['id']}/content")).json()
        assert "silver coins" in " ".join(part["text"] for part in content["data"])
        updated = await http.post(
            f"/v1/vector_stores/{store['id']}",
            json={"name": "renamed", "metadata": {"k": "v"}, "expires_after": {"anchor": "last_active_at", "days": 2}},
        )
        assert updated.json()["name"] == "renamed" and updated.json()["metadata"] == {"k": "v"}
        assert updated.json()["expires_at"] == updated.json()["last_active_at"] + 2 * 86400
        listed = (await http.get("/v1/vector_stores")).json()
        assert [s["id"] for s in listed["data"]] == [store["id"]]
        deleted = (await http.delete(f"/v1/vector_stores/{store['id']}")).json()
        assert deleted == {"id": store["id"], "object": "vector_store.deleted", "deleted": True}
        assert (await http.get(f"/v1/vector_stores/{store['id']}")).status_code == 404
        assert (await http.get(f"/v1/files/{file['id']}")).status_code == 200


async def test_a_store_made_with_files_answers_as_it_was_written(tmp_path: Path) -> None:
    """A create answers with the store as its write left it (each file waiting for its ingestion), the answer a
    repeat of its key is given; once ingested, the store says so."""
    async with knowledge_app(tmp_path) as (http, services):
        one, two = [await upload(http, f"{n}.txt", TEXT) for n in ("one", "two")]
        made = await http.post("/v1/vector_stores", json={"name": "s", "file_ids": [one["id"], two["id"], one["id"]]})
        assert made.status_code == 200, made.text
        store = made.json()
        assert (store["status"], store["usage_bytes"]) == ("in_progress", 0)
        assert store["file_counts"] == {"in_progress": 2, "completed": 0, "failed": 0, "cancelled": 0, "total": 2}
        await settled(services)
        done = (await http.get(f"/v1/vector_stores/{store['id']}")).json()
        assert done["file_counts"]["completed"] == 2 and done["usage_bytes"] > 0


async def test_files_attach_update_detach_and_batches(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        store = (await http.post("/v1/vector_stores", json={"name": "s"})).json()
        base = f"/v1/vector_stores/{store['id']}"
        one, two, three = [await upload(http, f"{n}.txt", TEXT) for n in ("one", "two", "three")]
        attached = await http.post(f"{base}/files", json={"file_id": one["id"], "attributes": {"year": 2024}})
        assert attached.status_code == 200 and attached.json()["status"] == "in_progress"
        batch = await http.post(
            f"{base}/file_batches",
            json={"files": [{"file_id": two["id"], "attributes": {"tag": "b"}}, {"file_id": three["id"]}]},
        )
        assert batch.status_code == 200, batch.text
        await settled(services)
        done = (await http.get(f"{base}/file_batches/{batch.json()['id']}")).json()
        assert done["status"] == "completed" and done["file_counts"]["completed"] == 2
        in_batch = (await http.get(f"{base}/file_batches/{done['id']}/files")).json()
        assert {f["id"] for f in in_batch["data"]} == {two["id"], three["id"]}
        other = (await http.post("/v1/vector_stores", json={"name": "other"})).json()
        for method, path in (("GET", ""), ("POST", "/cancel")):  # a batch is found under its own store only
            missing = await http.request(method, f"/v1/vector_stores/{other['id']}/file_batches/{done['id']}{path}")
            assert missing.status_code == 404
            assert missing.json()["error"]["message"] == (
                f"file batch '{done['id']}' not found in vector store '{other['id']}'"
            )
        completed = (await http.get(f"{base}/files", params={"filter": "completed"})).json()
        assert len(completed["data"]) == 3
        assert (await http.get(f"{base}/files", params={"filter": "failed"})).json()["data"] == []
        changed = await http.post(f"{base}/files/{one['id']}", json={"attributes": {"year": 2025, "ok": True}})
        assert changed.json()["attributes"] == {"year": 2025, "ok": True}
        detached = await http.delete(f"{base}/files/{one['id']}")
        assert detached.json() == {"id": one["id"], "object": "vector_store.file.deleted", "deleted": True}
        assert (await http.get(f"{base}/files/{one['id']}")).status_code == 404
        assert (await http.get(f"/v1/vector_stores/{store['id']}")).json()["file_counts"]["total"] == 2


async def test_bad_input_is_refused_and_unreadable_files_fail_with_a_reason(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        store = (await http.post("/v1/vector_stores", json={"name": "s"})).json()
        base = f"/v1/vector_stores/{store['id']}"
        assert (await http.post(f"{base}/files", json={"file_id": "file-nope"})).status_code == 404
        assert (await http.post("/v1/vector_stores", json={"file_ids": ["file-nope"]})).status_code == 404
        assert (await http.get("/v1/vector_stores/vs_nope")).status_code == 404
        assert (await http.post("/v1/vector_stores/vs_nope/files", json={"file_id": "x"})).status_code == 404
        wrong_model = await http.post("/v1/vector_stores", json={"embedding_model": "nope"})
        assert wrong_model.status_code == 400
        wrong_dim = await http.post("/v1/vector_stores", json={"embedding_dimension": 12})
        assert wrong_dim.status_code == 400 and "384" in wrong_dim.text
        too_many = {f"k{i}": "v" for i in range(17)}
        assert (await http.post("/v1/vector_stores", json={"metadata": too_many})).status_code == 400
        junk = await upload(http, "junk.bin", bytes(range(256)) * 64)
        attached = await http.post(f"{base}/files", json={"file_id": junk["id"], "attributes": {"x": "y" * 513}})
        assert attached.status_code == 400
        attached = await http.post(f"{base}/files", json={"file_id": junk["id"]})
        assert attached.status_code == 200
        await settled(services)
        failed = (await http.get(f"{base}/files/{junk['id']}")).json()
        assert failed["status"] == "failed"
        assert failed["last_error"]["code"] in ("unsupported_file", "invalid_file") and failed["last_error"]["message"]
        counts = (await http.get(base)).json()["file_counts"]
        assert counts == {"in_progress": 0, "completed": 0, "failed": 1, "cancelled": 0, "total": 1}


async def test_a_store_deleted_during_ingestion_loses_nothing_else(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        file = await upload(http, "river.txt", TEXT)
        doomed = (await http.post("/v1/vector_stores", json={"file_ids": [file["id"]]})).json()
        kept = (await http.post("/v1/vector_stores", json={"file_ids": [file["id"]]})).json()
        assert (await http.delete(f"/v1/vector_stores/{doomed['id']}")).status_code == 200
        await settled(services)
        assert (await http.get(f"/v1/vector_stores/{doomed['id']}")).status_code == 404
        survivor = (await http.get(f"/v1/vector_stores/{kept['id']}")).json()
        assert survivor["file_counts"]["completed"] == 1
        found = await http.post(f"/v1/vector_stores/{kept['id']}/search", json={"query": "toll"})
        assert found.status_code == 200 and found.json()["data"]


async def test_a_file_that_expires_before_its_ingestion_fails_rather_than_being_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        form = {"purpose": "assistants", "expires_after[anchor]": "created_at", "expires_after[seconds]": "3600"}
        sent = await http.post("/v1/files", files={"file": ("river.txt", TEXT, "text/plain")}, data=form)
        assert sent.status_code == 200, sent.text
        file = sent.json()
        monkeypatch.setattr(ingest, "now", lambda: file["expires_at"])  # the hour is over when the worker reads it
        store = (await http.post("/v1/vector_stores", json={"file_ids": [file["id"]]})).json()
        await settled(services)
        attached = (await http.get(f"/v1/vector_stores/{store['id']}/files/{file['id']}")).json()
        assert (attached["status"], attached["last_error"]["code"]) == ("failed", "invalid_file")
        assert "expired" in attached["last_error"]["message"]
