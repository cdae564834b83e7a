"""The load generator: a closed-loop async HTTP client, run as its own process.

``python -m bench.loadgen < spec.json > results.json``. The spec is::

    {"base": "http://127.0.0.1:P/v1", "bases": ["http://127.0.0.1:P/v1", "http://127.0.0.1:Q/v1"],
     "stub": "http://127.0.0.1:S", "repeats": 3,
     "jobs": [{"name": "turn.c8", "scenario": "turn", "concurrency": 8,
               "duration": 2.0, "params": {...}}, ...]}

Every job is prepared first (agent, one session per worker): its agent on
``base``, its workers spread over ``bases`` (the replicas; default ``[base]``). Then, ``repeats``
times, each job runs one timed window in turn, so that repeated runs of
different jobs are interleaved and slow drift (a growing database, a warming
cache) spreads over all of them alike. A job's first window starts with one
untimed warm-up operation per worker (connections, sessions, caches); then each
worker loops until the window's ``duration`` has passed, or until ``count``
operations were done. Operations still in flight at the deadline are awaited
and counted: the window's elapsed time runs to the last one's end. With the
``fresh_sessions`` param every worker opens a new session after the warm-up,
at the start of each window (the history test needs an empty session); so does
it, from the second window on, in a job with fewer workers than replicas, so that
successive windows go to successive replicas. With several replicas each run's
``info`` counts the successful operations served by each (``ops_by_replica``).

Output: ``{"results": {name: [run summary, ...]}, "info": {name: {...}}}`` on stdout
(see :func:`bench.stats.summarise_run`).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from .listing import LISTING_SCENARIOS
from .scenarios import TURN_SCENARIOS, OpError, Outcome, Scenario, Worker
from .stats import RunSummary, summarise_run

HTTP_TIMEOUT_S = 120.0
SCENARIOS: dict[str, type[Scenario]] = {**TURN_SCENARIOS, **LISTING_SCENARIOS}


@dataclass
class Job:
    """One workload at one concurrency, with its workers and client once prepared."""

    name: str
    scenario_name: str
    concurrency: int
    duration: float | None
    count: int | None
    params: dict[str, Any]
    keep_series: bool = False
    scenario: Scenario | None = None
    workers: list[Worker] = field(default_factory=list)
    http: httpx.AsyncClient | None = None
    info: dict[str, Any] = field(default_factory=dict)
    windows_run: int = 0
    bases: tuple[str, ...] = ()

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Job:
        """Read one entry of the spec's ``jobs``."""
        if spec["scenario"] not in SCENARIOS:
            raise ValueError(f"unknown scenario {spec['scenario']!r}; known: {sorted(SCENARIOS)}")
        count = spec.get("count")
        return cls(
            name=spec["name"],
            scenario_name=spec["scenario"],
            concurrency=int(spec.get("concurrency", 1)),
            duration=None if count else float(spec.get("duration", 1.0)),
            count=int(count) if count else None,
            params=dict(spec.get("params", {})),
            keep_series=bool(spec.get("keep_series", False)),
        )


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, OpError):
        return exc.kind
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    return type(exc).__name__


async def prepare(job: Job, base: str, stub: str, headers: dict[str, str], bases: Sequence[str] | None = None) -> None:
    """Open the job's client, prepare its scenario and set up one worker per unit of concurrency.

    The scenario is prepared on ``base``; the workers spread over ``bases`` (every replica's
    ``/v1`` URL; default: ``base`` alone), see :class:`bench.scenarios.Worker`.
    ``headers`` go with every request (``Authorization`` when the server has API keys on).
    """
    job.http = httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, headers=headers)
    job.bases = tuple(bases or [base])
    job.scenario = SCENARIOS[job.scenario_name](job.http, base, stub, job.params)
    job.info = await job.scenario.prepare()
    limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
    job.workers = [
        Worker(
            i,
            httpx.AsyncClient(limits=limits, timeout=HTTP_TIMEOUT_S, headers=headers),
            bases=job.bases,
            stride=job.concurrency,
        )
        for i in range(job.concurrency)
    ]
    await asyncio.gather(*(job.scenario.setup_worker(w) for w in job.workers))


async def _warm_up(scenario: Scenario, workers: list[Worker], rounds: int) -> int:
    failures = 0
    for _ in range(rounds):
        results = await asyncio.gather(*(scenario.op(w) for w in workers), return_exceptions=True)
        failures += sum(1 for r in results if isinstance(r, BaseException))
    return failures


async def run_window(job: Job) -> RunSummary:
    """One timed window of a prepared job."""
    scenario = job.scenario
    assert scenario is not None
    rounds = int(job.params.get("warmup_rounds", 1)) if not job.windows_run else 0
    job.windows_run += 1
    warm_failures = await _warm_up(scenario, job.workers, rounds)
    # Fewer workers than replicas: each later window starts on a new session, on the next replica.
    fewer = job.windows_run > 1 and job.concurrency < len(job.bases)
    if job.params.get("fresh_sessions") or fewer:
        await asyncio.gather(*(scenario.setup_worker(w) for w in job.workers))
    latencies: list[float] = []
    extra: dict[str, list[float]] = {}
    errors: Counter[str] = Counter()
    by_base: Counter[str] = Counter()
    remaining = job.count or 0
    start = time.perf_counter()
    deadline = start + (job.duration or 0.0)
    last_end = start

    async def loop(worker: Worker) -> None:
        nonlocal remaining, last_end
        while True:
            if job.count is not None:
                if remaining <= 0:
                    return
                remaining -= 1
            elif time.perf_counter() >= deadline:
                return
            try:
                outcome: Outcome = await scenario.op(worker)
            except (OpError, httpx.HTTPError) as exc:
                errors[_error_kind(exc)] += 1
            else:
                latencies.append(outcome.latency_ms)
                by_base[worker.base] += 1
                for key, value in outcome.extra.items():
                    extra.setdefault(key, []).append(value)
            last_end = time.perf_counter()

    await asyncio.gather(*(loop(w) for w in job.workers))
    info: dict[str, Any] = {"warmup_failures": warm_failures}
    if len(job.bases) > 1 and scenario.on_replicas:
        info["ops_by_replica"] = [by_base[base] for base in job.bases]
    if job.keep_series:
        info["series_ms"] = latencies
    return summarise_run(latencies, dict(errors), last_end - start, extra, info)


async def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Prepare every job, then run ``repeats`` interleaved rounds of windows."""
    jobs = [Job.from_spec(j) for j in spec["jobs"]]
    results: dict[str, list[RunSummary]] = {job.name: [] for job in jobs}
    try:
        for job in jobs:
            await prepare(job, spec["base"], spec["stub"], spec.get("headers", {}), spec.get("bases"))
        for _ in range(int(spec.get("repeats", 1))):
            for job in jobs:
                results[job.name].append(await run_window(job))
    finally:
        for job in jobs:
            for client in [job.http, *(w.http for w in job.workers)]:
                if client is not None:
                    await client.aclose()
    return {"results": results, "info": {job.name: job.info for job in jobs}}


def main() -> int:
    """Read the spec from stdin, run it, write the results as JSON to stdout."""
    spec = json.loads(sys.stdin.read())
    output = asyncio.run(run_spec(spec))
    sys.stdout.write(json.dumps(output))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
