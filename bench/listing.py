"""Listing workloads: create many sessions, list them a page at a time, read one.

These run against an agent with thousands of sessions, to show whether listing
and reading cost grows with the number of sessions (``OFFSET`` scans, missing
indexes, loading every session's turns).
"""

from __future__ import annotations

import random
import time
from typing import Any

from .scenarios import OpError, Outcome, Scenario, Worker, json_of, ms_since


class SeedSessionsScenario(Scenario):
    """Create sessions as fast as the workers can (run it with ``count``)."""

    agent_config: dict[str, Any] = {}

    async def setup_worker(self, worker: Worker) -> None:
        """No session needed."""

    async def op(self, worker: Worker) -> Outcome:
        """POST a new session."""
        start = time.perf_counter()
        response = await worker.http.post(
            f"{self.base_of(worker)}/agents/{self.agent_id}/session", json={"session_name": f"s{worker.index}"}
        )
        latency = ms_since(start)
        json_of(response)
        return Outcome(latency)


class ListSessionsScenario(Scenario):
    """``GET /agents/{a}/sessions`` with ``limit`` and ``start_index`` from the params."""

    async def setup_worker(self, worker: Worker) -> None:
        """No session needed."""

    async def op(self, worker: Worker) -> Outcome:
        """List one page of sessions and check its size."""
        limit = int(self.params.get("limit", 100))
        query = {"limit": limit, "start_index": int(self.params.get("start_index", 0))}
        start = time.perf_counter()
        response = await worker.http.get(f"{self.base_of(worker)}/agents/{self.agent_id}/sessions", params=query)
        latency = ms_since(start)
        if len(json_of(response)["data"]) != limit:
            raise OpError("shape", "short page")
        return Outcome(latency)


class GetSessionScenario(Scenario):
    """``GET /agents/{a}/session/{s}`` of sessions picked at random from the middle of the list."""

    async def setup_worker(self, worker: Worker) -> None:
        """Pick the sessions this worker will read."""
        query = {"limit": 100, "start_index": int(self.params.get("start_index", 0))}
        page = json_of(await worker.http.get(f"{self.base_of(worker)}/agents/{self.agent_id}/sessions", params=query))
        worker.data["ids"] = [s["session_id"] for s in page["data"]]
        if not worker.data["ids"]:
            raise OpError("setup", "agent has no sessions")

    async def op(self, worker: Worker) -> Outcome:
        """Read one session."""
        session_id = random.choice(worker.data["ids"])  # noqa: S311 - load spreading, not security
        start = time.perf_counter()
        response = await worker.http.get(f"{self.base_of(worker)}/agents/{self.agent_id}/session/{session_id}")
        latency = ms_since(start)
        json_of(response)
        return Outcome(latency)


LISTING_SCENARIOS: dict[str, type[Scenario]] = {
    "seed_sessions": SeedSessionsScenario,
    "list_sessions": ListSessionsScenario,
    "get_session": GetSessionScenario,
}
