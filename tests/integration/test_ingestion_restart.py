"""Ingestion survives a crash: a job claimed by a killed process is taken over at restart and completed once."""

from __future__ import annotations

from pathlib import Path

import httpx
from ingestion_processes import (
    EMBEDDING_MODEL,
    STATIC,
    document,
    expected_chunks,
    ingestion_config,
    stored_chunks,
    upload,
    wait_until_completed,
)
from integration_helpers import gate_name, open_gate_finally, wait_for_requests

from ferryman.testing import ScriptedServerClient
from support import Proc, ferryman_server, running


def test_a_job_claimed_when_the_process_is_killed_completes_once_after_restart(
    tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    db = tmp_path / "ingestion.db"
    proc, base = ferryman_server(tmp_path, scripted_proc[1], db, "--config", ingestion_config(tmp_path))
    gate = gate_name()
    held = document("lighthouses", hold=gate)
    plain = document("ferries")
    with running(proc), open_gate_finally(served_model, gate):
        with httpx.Client(base_url=base, timeout=30) as http:
            held_id = upload(http, "held.txt", held)
            body = {"name": "kb", "file_ids": [held_id], "chunking_strategy": STATIC}
            store = http.post("/v1/vector_stores", json=body).json()
            assert store["embedding_model"] == EMBEDDING_MODEL and store["embedding_dimension"] == 8
            [request] = wait_for_requests(served_model, 1)  # the job is claimed, its embedding held
            assert "[[hold:" in " ".join(request["embeddings"]["input"])
            attached = http.get(f"/v1/vector_stores/{store['id']}/files/{held_id}").json()
            assert attached["status"] == "in_progress"

        proc.kill()
        served_model.open_gate(gate)
        proc.start()

        with httpx.Client(base_url=base, timeout=30) as http:
            plain_id = upload(http, "plain.txt", plain)
            assert http.post(f"/v1/vector_stores/{store['id']}/files", json={"file_id": plain_id}).status_code == 200
            done = wait_until_completed(http, store["id"], 2)
            assert done["status"] == "completed" and done["usage_bytes"] > 0
            attached = http.get(f"/v1/vector_stores/{store['id']}/files/{held_id}").json()
            assert attached["status"] == "completed" and attached["last_error"] is None
            hits = http.post(
                f"/v1/vector_stores/{store['id']}/search",
                json={"query": "lighthouses", "ranking_options": {"ranker": "keyword"}},
            )
            assert hits.status_code == 200 and hits.json()["data"][0]["file_id"] == held_id

    chunks = stored_chunks(str(db), store["id"], [held_id, plain_id])
    assert len(chunks[held_id]) == expected_chunks("held.txt", held) > 1
    assert len(chunks[plain_id]) == expected_chunks("plain.txt", plain)
    assert [c.position for c in chunks[held_id]] == list(range(len(chunks[held_id])))
    ids = [c.chunk_id for found in chunks.values() for c in found]
    assert len(ids) == len(set(ids))
