"""Two replicas share ingestion: files uploaded through either, attached through one, are each ingested exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from ingestion_processes import (
    INGESTED_LOG,
    STATIC,
    document,
    expected_chunks,
    ingestion_config,
    stored_chunks,
    upload,
    wait_until_completed,
)
from integration_helpers import gate_name, open_gate_finally, wait_for
from replicas import replicas, shared_state

from ferryman.testing import ScriptedServerClient
from support import Proc

FILES = 6
HELD = 2


class Pair:
    """Replicas ``a`` and ``b`` over one state, and the ``--db`` they share."""

    def __init__(self, procs: list[Proc], clients: list[httpx.Client], db: str) -> None:
        self.procs, self.db = procs, db
        self.a, self.b = clients


@pytest.fixture(params=["postgres", "redis"])
def pair(
    request: pytest.FixtureRequest, tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> Iterator[Pair]:
    """Records in PostgreSQL with Redis for coordination, or everything in Redis; files in one shared directory."""
    config = ingestion_config(tmp_path)
    with shared_state(request.param) as (db_url, coordination):
        started = replicas(
            2, tmp_path, scripted_proc[1], db_url, coordination, "--config", config, "--log-level", "info"
        )
        procs = [proc for proc, _ in started]
        clients = [httpx.Client(base_url=base, timeout=30) for _, base in started]
        try:
            yield Pair(procs, clients, db_url)
        finally:
            for client in clients:
                client.close()
            for proc in procs:
                proc.stop()


def _held(served_model: ScriptedServerClient, gate: str) -> int:
    marker = f"[[hold:{gate}]]"
    return sum(1 for r in served_model.requests() if marker in " ".join(r.get("embeddings", {}).get("input", [])))


def test_each_file_is_ingested_once_across_two_replicas(pair: Pair, served_model: ScriptedServerClient) -> None:
    gate = gate_name()
    docs = {f"doc{i}.txt": document(f"topic {i}", hold=gate if i < HELD else None) for i in range(FILES)}
    with open_gate_finally(served_model, gate):
        ids = {name: upload(pair.a if i % 2 else pair.b, name, data) for i, (name, data) in enumerate(docs.items())}
        store = pair.b.post("/v1/vector_stores", json={"name": "shared", "chunking_strategy": STATIC}).json()
        batches = f"/v1/vector_stores/{store['id']}/file_batches"
        held = pair.b.post(batches, json={"file_ids": [ids[f"doc{i}.txt"] for i in range(HELD)]})
        assert held.status_code == 200, held.text
        # Both held jobs claimed: by B (then busy: A must take the rest), or one each (each ingests at least that).
        wait_for(lambda: _held(served_model, gate) == HELD, timeout=30, what="both held files to be claimed")
        rest = pair.b.post(batches, json={"file_ids": [ids[f"doc{i}.txt"] for i in range(HELD, FILES)]})
        assert rest.status_code == 200, rest.text
        wait_until_completed(pair.a, store["id"], FILES - HELD)
        assert pair.a.get(f"/v1/vector_stores/{store['id']}").json()["file_counts"]["in_progress"] == HELD
        served_model.open_gate(gate)
        done = wait_until_completed(pair.a, store["id"], FILES)

    assert done["status"] == "completed" and done["file_counts"]["total"] == FILES
    found = pair.a.post(
        f"/v1/vector_stores/{store['id']}/search", json={"query": "topic 3", "ranking_options": {"ranker": "keyword"}}
    )
    assert found.status_code == 200 and found.json()["data"]

    chunks = stored_chunks(pair.db, store["id"], list(ids.values()))
    for name, file_id in ids.items():
        assert len(chunks[file_id]) == expected_chunks(name, docs[name]) > 1, name
    chunk_ids = [c.chunk_id for found in chunks.values() for c in found]
    assert len(chunk_ids) == len(set(chunk_ids))

    per_replica = [sum(INGESTED_LOG in line for line in proc.log.read_text().splitlines()) for proc in pair.procs]
    assert sum(per_replica) == FILES and all(per_replica), per_replica
