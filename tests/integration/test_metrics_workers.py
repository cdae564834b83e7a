"""``/metrics`` of ``ferryman serve --workers 2``: whichever worker answers a scrape, it counts both workers' work.

A real server process over PostgreSQL and Redis, its workers sharing their metrics through
``PROMETHEUS_MULTIPROC_DIR`` (set here, so the test sees the directory: emptied at start, and
left without the live gauges of the workers once they stopped).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from integration_helpers import run_turn
from metrics_support import key, samples
from prometheus_client.mmap_dict import MmapedDict
from replicas import shared_state

from ferryman.testing import ScriptedServerClient
from support import Proc, create_agent, create_session, ferryman_server, running

BATCH = 8
MAX_REQUESTS = 400
SCRAPES = 6


def _writers(directory: Path) -> set[str]:
    """The process ids that counted a ``GET /v1/models`` in the shared directory.

    Other histograms are written by each worker's background loops as it starts: only this route's samples
    tell which workers answered the test's requests.
    """
    return {
        path.stem.rsplit("_", 1)[1]
        for path in directory.glob("histogram_*.db")
        if any('"/v1/models"' in key for key, *_ in MmapedDict.read_all_values_from_file(str(path)))
    }


def _list_models(base: str) -> int:
    # A new connection each time: the kernel hands each to either worker.
    return httpx.get(f"{base}/v1/models", timeout=30).status_code


def test_two_workers_report_the_sum_of_their_requests_on_every_scrape(
    tmp_path: Path,
    scripted_proc: tuple[Proc, str],
    served_model: ScriptedServerClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory = tmp_path / "metrics"
    directory.mkdir()
    (directory / "counter_999999.db").write_bytes(b"an earlier run's file")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    with shared_state("postgres") as (db_url, coordination):
        proc, base = ferryman_server(tmp_path, scripted_proc[1], db_url, "--redis", coordination, "--workers", "2")
        with running(proc), httpx.Client(base_url=base, timeout=30) as http:
            agent_id = create_agent(http)
            served_model.enqueue_text("done")
            assert run_turn(http, agent_id, create_session(http, agent_id), "go")["status"] == "completed"
            sent = 0
            # Until both workers answered some (the kernel hands each new connection to either, as it likes).
            while len(_writers(directory)) < 2:
                assert sent < MAX_REQUESTS, f"one worker took all {sent} requests"
                with ThreadPoolExecutor(max_workers=BATCH) as pool:
                    assert list(pool.map(lambda _: _list_models(base), range(BATCH))) == [200] * BATCH
                sent += BATCH
            served = key(
                "http_server_request_duration_seconds_count",
                http_request_method="GET",
                http_route="/v1/models",
                http_response_status_code="200",
            )
            for _ in range(SCRAPES):
                scrape = httpx.get(f"{base}/metrics", timeout=30)
                assert scrape.status_code == 200, scrape.text
                scraped = samples(scrape.text)
                assert scraped[served] == sent
                assert scraped[key("ferryman_turns_total", api="agents", status="completed")] == 1
                assert scraped[key("ferryman_running_turns", api="agents")] == 0
            assert list(directory.glob("gauge_livesum_*.db"))  # the running-turns gauge of the turn's worker
            assert not (directory / "counter_999999.db").exists()
    assert not list(directory.glob("gauge_livesum_*.db"))  # each worker marked itself dead as it stopped
