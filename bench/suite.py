"""The phases of a benchmark run and the figures each one produces.

Order matters and is fixed: memory and listing first (the server is fresh, so
"idle" RSS means idle), then the throughput sweep (which also yields the
concurrency-1 overhead figures), then the latency workloads, then history.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .modes import Mode
from .procs import ManagedProcess, child_env
from .replicas import Replicas
from .stats import Figure, RunSummary, error_kinds, figure, from_runs, ratio_figure, total_errors

LOADGEN_TIMEOUT_S = 900.0
HISTORY_NEIGHBOURS = 3


def p50(run: RunSummary) -> float:
    """A run's median latency (ms)."""
    return float(run["latency_ms"]["p50"])


def p99(run: RunSummary) -> float:
    """A run's 99th-percentile latency (ms)."""
    return float(run["latency_ms"]["p99"])


def rate(run: RunSummary) -> float:
    """A run's completed operations per second."""
    return float(run["rate"])


def extra(name: str, key: str) -> Any:
    """A picker of an extra timing's statistic (e.g. time to first SSE event, p50)."""
    return lambda run: float(run["extra_ms"][name][key])


@dataclass
class Target:
    """The servers under test."""

    stub: ManagedProcess
    stub_root: str
    servers: Replicas
    """ferryman: one server, or several replicas that the load generator's workers spread over."""
    enqueue: bool
    headers: dict[str, str] = field(default_factory=dict)
    """Sent with every request to the server (its API key, with ``--api-keys``)."""


class Suite:
    """Runs the phases against a started :class:`Target` and collects figures.

    Args:
        mode: Sizes of the run.
        target: The started servers.
    """

    def __init__(self, mode: Mode, target: Target) -> None:
        self.mode = mode
        self.target = target
        self.figures: list[Figure] = []
        self.info: dict[str, Any] = {}

    def loadgen(self, jobs: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
        """Run ``python -m bench.loadgen`` with these jobs; return its parsed output.

        Raises:
            RuntimeError: the load generator failed (its stderr is included).
        """
        for job in jobs:
            job.setdefault("params", {}).setdefault("enqueue", self.target.enqueue)
        bases = [f"{base}/v1" for base in self.target.servers.bases]
        spec = {
            "base": bases[0],
            "bases": bases,
            "stub": self.target.stub_root,
            "repeats": repeats,
            "jobs": jobs,
            "headers": self.target.headers,
        }
        done = subprocess.run(
            [sys.executable, "-m", "bench.loadgen"],
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            timeout=LOADGEN_TIMEOUT_S,
            check=False,
            env=child_env(),
        )
        if done.returncode != 0:
            raise RuntimeError(f"load generator failed ({done.returncode}):\n{done.stderr[-4000:]}")
        output: dict[str, Any] = json.loads(done.stdout)
        if len(bases) > 1:
            self._count_by_replica(output["results"])
        return output

    def _count_by_replica(self, results: dict[str, list[RunSummary]]) -> None:
        """Keep each job's successful operations per replica (all its runs) in ``info``."""
        counts: dict[str, list[int]] = self.info.setdefault("ops_by_replica", {})
        for name, runs in results.items():
            per_run = [run["info"]["ops_by_replica"] for run in runs if "ops_by_replica" in run["info"]]
            if per_run:
                counts[name] = [sum(column) for column in zip(*per_run, strict=True)]

    def add(self, *figures: Figure) -> None:
        """Record figures."""
        self.figures.extend(figures)

    def rss(self, name: str, label: str) -> list[float]:
        """Record the server's RSS now as a one-sample figure (the largest replica's); return each replica's.

        With several replicas, the label says so, and ``info`` keeps every replica's value.
        """
        values = self.target.servers.rss_mib()
        if len(values) > 1:
            label = f"{label} (max of {len(values)} replicas)"
            self.info[f"rss_mib.{name}"] = [round(value, 1) for value in values]
        self.add(figure(f"memory.{name}", label, "MiB", [max(values)], 0, "memory"))
        return values

    # ---- phases ----------------------------------------------------------

    def memory_and_listing(self) -> None:
        """RSS idle; create many sessions; RSS again; then list and get sessions."""
        mode = self.mode
        idle = self.rss("rss_idle", "server RSS, idle after start")
        seed = {"name": "seed", "scenario": "seed_sessions", "concurrency": mode.seed_concurrency,
                "count": mode.sessions, "params": {"warmup_rounds": 0}}  # fmt: skip
        seeded = self.loadgen([seed], repeats=1)
        agent_id = seeded["info"]["seed"]["agent_id"]
        runs = seeded["results"]["seed"]
        self.add(from_runs("listing.create_session_rate", f"create {mode.sessions} sessions "
                           f"(c={mode.seed_concurrency})", "sessions/s", runs, rate, "listing"))  # fmt: skip
        after = self.rss("rss_after_sessions", f"server RSS after {mode.sessions} sessions")
        per_session = (sum(after) - sum(idle)) * 1024.0 / mode.sessions
        label = "RSS growth per session" + (f", summed over {len(idle)} replicas" if len(idle) > 1 else "")
        self.add(figure("memory.per_session", label, "KiB", [per_session], 0, "memory"))
        window = mode.latency_window_s
        common = {"concurrency": 1, "duration": window}
        last = max(0, mode.sessions - 100)
        jobs = [
            {"name": "list_first", "scenario": "list_sessions", **common, "params": {"agent_id": agent_id}},
            {"name": "list_last", "scenario": "list_sessions", **common,
             "params": {"agent_id": agent_id, "start_index": last}},
            {"name": "get_session", "scenario": "get_session", **common,
             "params": {"agent_id": agent_id, "start_index": mode.sessions // 2}},
        ]  # fmt: skip
        results = self.loadgen(jobs, mode.repeats)["results"]
        labels = {
            "list_first": f"list sessions limit=100, first page ({mode.sessions} sessions)",
            "list_last": f"list sessions limit=100, start_index={last}",
            "get_session": f"get session ({mode.sessions} sessions)",
        }
        for name, label in labels.items():
            self.add(*self._latency_pair(f"listing.{name}", label, results[name], "listing"))

    def throughput(self) -> None:
        """Turns/s and requests/s at every concurrency, interleaved; overhead and ratios from them."""
        mode = self.mode
        jobs = [
            {"name": f"{scenario}.c{c}", "scenario": scenario, "concurrency": c, "duration": mode.window_s,
             "params": {"turns_per_session": mode.turns_per_session}}
            for c in mode.concurrencies
            for scenario in ("direct", "turn", "tool_turn")
        ]  # fmt: skip
        servers = self.target.servers
        cpu_before = servers.cpu_seconds()
        output = self.loadgen(jobs, mode.repeats)
        cpu = servers.cpu_seconds() - cpu_before
        results: dict[str, list[RunSummary]] = output["results"]
        turns = sum(run["ok"] for name, runs in results.items() if not name.startswith("direct") for run in runs)
        per_turn = cpu * 1000.0 / turns if turns else math.nan
        label = "server CPU per turn, throughput sweep (one-step and tool turns, warm-up included)"
        if len(servers) > 1:
            label = f"{label}, all {len(servers)} replicas summed"
        self.add(figure("cpu.per_turn", label, "ms", [per_turn], 0, "cpu"))
        self.info["direct_request_messages"] = output["info"][f"direct.c{mode.concurrencies[0]}"]["payload_messages"]
        units = {"direct": "req/s", "turn": "turns/s", "tool_turn": "turns/s"}
        labels = {"direct": "stub alone (direct)", "turn": "one-step turn", "tool_turn": "turn + server tool"}
        for scenario, unit in units.items():
            for c in mode.concurrencies:
                runs, label = results[f"{scenario}.c{c}"], f"{labels[scenario]}, c={c}"
                group = f"throughput.{scenario}"
                self.add(from_runs(f"throughput.{scenario}.c{c}", label, unit, runs, rate, group))
                self.add(*self._latency_pair(f"latency.{scenario}.c{c}", label, runs, group))
            top = max(mode.concurrencies)
            top_runs = results[f"{scenario}.c{top}"]
            tails = [p99(r) / p50(r) if p50(r) else math.nan for r in top_runs]
            self.add(figure(f"tail.{scenario}.c{top}", f"{labels[scenario]}: p99/p50 at c={top}", "x", tails,
                            total_errors(top_runs), "tail", error_kinds=error_kinds(top_runs)))  # fmt: skip
        self._overhead(results)

    def _overhead(self, results: dict[str, list[RunSummary]]) -> None:
        c1 = min(self.mode.concurrencies)
        turn, direct = results[f"turn.c{c1}"], results[f"direct.c{c1}"]
        self.add(
            ratio_figure("headline.overhead_ratio_p50", f"turn via ferryman / direct to stub, p50, c={c1}",
                         turn, direct, p50, "headline", headline=True),
            ratio_figure("headline.overhead_ratio_p99", f"turn via ferryman / direct to stub, p99, c={c1}",
                         turn, direct, p99, "headline"),
        )  # fmt: skip
        added = [p50(t) - p50(d) for t, d in zip(turn, direct, strict=False)]
        self.add(figure("overhead.added_p50", f"ferryman's added latency per turn, p50, c={c1}", "ms", added,
                        total_errors(turn) + total_errors(direct), "headline",
                        error_kinds=error_kinds([*turn, *direct])))  # fmt: skip
        ref = 32 if 32 in self.mode.concurrencies else max(self.mode.concurrencies)
        for scenario in ("turn", "tool_turn"):
            self.add(ratio_figure(
                f"headline.throughput_ratio_{scenario}_c{ref}", f"{scenario} turns/s / stub req/s at c={ref}",
                results[f"{scenario}.c{ref}"], results[f"direct.c{ref}"], rate, "headline",
                headline=scenario == "turn",
            ))  # fmt: skip

    def latency(self) -> None:
        """Streaming (first event, turn_complete) and the client-tool round trip, at concurrency 1."""
        mode = self.mode
        common = {"concurrency": 1, "duration": mode.latency_window_s,
                  "params": {"turns_per_session": mode.turns_per_session}}  # fmt: skip
        jobs = [{"name": "stream", "scenario": "stream_turn", **common},
                {"name": "client_tool", "scenario": "client_tool", **common}]  # fmt: skip
        results = self.loadgen(jobs, mode.repeats)["results"]
        stream, client = results["stream"], results["client_tool"]
        self.add(
            from_runs("streaming.first_event.p50", "stream: time to first SSE event, p50", "ms", stream,
                      extra("first_event", "p50"), "streaming"),
            from_runs("streaming.first_event.p99", "stream: time to first SSE event, p99", "ms", stream,
                      extra("first_event", "p99"), "streaming"),
            from_runs("streaming.turn_complete.p50", "stream: time to turn_complete, p50", "ms", stream,
                      extra("turn_complete", "p50"), "streaming"),
            from_runs("streaming.turn_complete.p99", "stream: time to turn_complete, p99", "ms", stream,
                      extra("turn_complete", "p99"), "streaming"),
            *self._latency_pair("client_tool.round_trip", "client tool: turn + resume", client, "client_tool"),
            from_runs("client_tool.turn.p50", "client tool: turn until awaiting_input, p50", "ms", client,
                      extra("turn", "p50"), "client_tool"),
            from_runs("client_tool.resume.p50", "client tool: resume until completed, p50", "ms", client,
                      extra("resume", "p50"), "client_tool"),
        )  # fmt: skip

    def history(self) -> None:
        """Latency of turn N of one session for each checkpoint N; a fresh session per repeat.

        Each checkpoint pools turns N, N+1 and N+2 of every session (their histories
        differ by at most four messages), so that a single long series still has a spread.
        """
        mode = self.mode
        job = {"name": "history", "scenario": "history", "concurrency": 1,
               "count": max(mode.history_checkpoints) + HISTORY_NEIGHBOURS - 1, "keep_series": True,
               "params": {"fresh_sessions": True, "direct_at": list(mode.history_checkpoints)}}  # fmt: skip
        runs = self.loadgen([job], mode.history_repeats)["results"]["history"]
        for n in mode.history_checkpoints:
            values = [_nth(run, n + k) for run in runs for k in range(HISTORY_NEIGHBOURS)]
            label = f"latency of turn {n} in one session (turns {n}..{n + HISTORY_NEIGHBOURS - 1})"
            self.add(figure(f"history.turn_{n}", label, "ms", values, total_errors(runs), "history",
                            error_kinds=error_kinds(runs)))  # fmt: skip
            direct = [extra(f"direct_{n}", "p50")(run) for run in runs]
            self.add(figure(f"history.direct_{n}", f"stub alone (direct) with turn {n}'s prompt", "ms", direct,
                            0, "history"))  # fmt: skip
            added = [_nth(run, n) - extra(f"direct_{n}", "p50")(run) for run in runs]
            self.add(figure(f"history.added_{n}", f"turn {n} less the direct call with its prompt", "ms", added,
                            0, "history"))  # fmt: skip

    def _latency_pair(self, name: str, label: str, runs: Sequence[RunSummary], group: str) -> list[Figure]:
        return [
            from_runs(f"{name}.p50", f"{label}, p50", "ms", runs, p50, group),
            from_runs(f"{name}.p99", f"{label}, p99", "ms", runs, p99, group),
        ]


def _nth(run: RunSummary, n: int) -> float:
    series = run["info"].get("series_ms", [])
    return float(series[n - 1]) if len(series) >= n else math.nan
