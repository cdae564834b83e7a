"""``python -m bench``: start the stub and ferryman on loopback, measure, report, stop them.

Examples::

    python -m bench --quick                 # < 2 minutes on 2 cores
    python -m bench                         # full run, < ~10 minutes
    python -m bench --quick --profile       # then sample the server under load with py-spy
    python -m bench --quick --db postgresql://... --redis redis://... --replicas 2   # two replicas, round-robin
    python -m bench --smoke --out /tmp/b.json   # seconds; what the smoke test runs
    python -m bench --knowledge --postgres postgresql://... --redis redis://...   # the chunk index, per backend
    python -m bench --knowledge --full      # also 1,000,000 chunks (by hand, not in CI)
    python -m bench --tool-use --model ~/models/qwen2.5-1.5b-instruct-q4_k_m.gguf   # tool-use score of a GGUF
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from . import knowledge, tool_use
from .knowledge_backends import BACKENDS
from .modes import Mode, select
from .procs import child_env, stub_process
from .profiling import PySpy, summarise
from .replicas import Replicas, db_kind, replica_refusal
from .report import note, write_json, write_profile, write_table
from .suite import Suite, Target
from .trace_sink import TraceSink

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "latest.json"
DEFAULT_REPLY = "The answer is 42."


def _sizes(text: str) -> tuple[int, ...]:
    """``--sizes``: positive chunk counts, comma-separated."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated chunk counts: {text!r}") from None
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"chunk counts are positive: {text!r}")
    return sizes


def _backends(text: str) -> tuple[str, ...]:
    """``--backends``: some of :data:`BACKENDS`, comma-separated."""
    chosen = tuple(part.strip() for part in text.split(","))
    unknown = [backend for backend in chosen if backend not in BACKENDS]
    if unknown or not text.strip():
        raise argparse.ArgumentTypeError(f"backends are some of {','.join(BACKENDS)}: {text!r}")
    return chosen


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Benchmark ferryman on loopback.")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="short run (< 2 minutes on 2 cores)")
    size.add_argument("--smoke", action="store_true", help="tiny run (seconds), for the smoke test")
    size.add_argument(
        "--full",
        action="store_true",
        help="with --knowledge: the default sizes and also 1,000,000 chunks on SQLite and PostgreSQL "
        "(run once by hand, never in CI; see bench/README.md for its run time)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON results file (default {DEFAULT_OUT})")
    parser.add_argument(
        "--db",
        help="passed to 'ferryman serve --db' as is (default: a SQLite file in a temporary folder); "
        "a postgresql://... or redis://... URL",
    )
    parser.add_argument(
        "--stub",
        choices=["routed", "queue"],
        default="routed",
        help="routed: tool calls chosen by message content (bench.stub, default); "
        "queue: plain ferryman.testing.server, a reply queued before each tool turn",
    )
    parser.add_argument(
        "--server-config",
        type=Path,
        help="passed to 'ferryman serve --config' (e.g. a file with 'telemetry: {metrics: false}')",
    )
    parser.add_argument(
        "--api-keys",
        action="store_true",
        help="turn API keys on (server.auth.api_keys) and send one with every request (default: auth off)",
    )
    parser.add_argument(
        "--traces",
        action="store_true",
        help="export the server's traces over OTLP/HTTP to a sink on loopback (OTEL_* variables; default: off)",
    )
    parser.add_argument("--repeats", type=int, help="override the mode's number of runs per figure")
    parser.add_argument("--window", type=float, help="override the mode's seconds per timed window")
    parser.add_argument("--profile", action="store_true", help="sample the server with py-spy under load at the end")
    parser.add_argument("--profile-seconds", type=float, default=8.0, help="seconds of load per profiled workload")
    parser.add_argument(
        "--knowledge",
        action="store_true",
        help="instead of the server run: the chunk index's ingestion and search figures (bench/knowledge.py)",
    )
    parser.add_argument("--postgres", help="with --knowledge: also measure PostgreSQL at this postgresql:// URL")
    parser.add_argument(
        "--sizes",
        type=_sizes,
        help="with --knowledge: these chunk counts (comma-separated, e.g. 1000000) instead of the mode's, on every "
        "backend measured; the rest of the mode (queries, writes, time budgets) stays",
    )
    parser.add_argument(
        "--backends",
        type=_backends,
        help=f"with --knowledge: only these of {','.join(BACKENDS)} (comma-separated; PostgreSQL and Redis "
        "need --postgres and --redis too)",
    )
    parser.add_argument(
        "--bulk",
        action="store_true",
        help="with --knowledge: fill PostgreSQL with its vector index dropped and build it after, at every size "
        "(at 1,000,000 chunks always)",
    )
    parser.add_argument(
        "--vectors",
        choices=["clustered", "uniform"],
        default="clustered",
        help="with --knowledge: stored and query vectors drawn around centroids (default, as real embeddings "
        "cluster) or uniform at random (an approximate index's worst case)",
    )
    parser.add_argument(
        "--redis",
        help="passed to each 'ferryman serve --redis' (live events shared by replicas; needed with --replicas 2+); "
        "with --knowledge: also measure Redis at this redis:// URL",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="separate 'ferryman serve' processes, each on its own port, over one shared --db (postgresql:// "
        "or redis://, with --redis); the load generator spreads its workers over them round-robin (default 1)",
    )
    parser.add_argument(
        "--tool-use",
        action="store_true",
        help="instead of the server run: score a GGUF model's tool calls (bench/tool_use.py)",
    )
    parser.add_argument("--model", help="with --tool-use: the GGUF file (default: the shipped SmolLM2)")
    parser.add_argument("--limit", type=int, help="with --tool-use: only the first N cases of each kind")
    return parser


def _api_key(tmp: Path, db: str) -> dict[str, str]:
    """Turn API keys on (a config file in ``tmp``), make one key in ``db``; the header that carries it."""
    (tmp / "api-keys.yaml").write_text("server:\n  auth:\n    api_keys: true\n")
    made = subprocess.run(
        [sys.executable, "-m", "ferryman.cli.main", "keys", "create", "--name", "bench", "--db", db, "--json"],
        capture_output=True, text=True, check=True, env=child_env(),
    )  # fmt: skip
    return {"Authorization": f"Bearer {json.loads(made.stdout)['key']}"}


def _meta(mode: Mode, args: argparse.Namespace, db: str, replicas: int = 1) -> dict[str, Any]:
    try:
        version = metadata.version("ferryman")
    except metadata.PackageNotFoundError:
        version = "unknown"
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "mode": mode.name,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "ferryman_version": version,
        "git_commit": commit or None,
        "stub": args.stub,
        "server_config": str(args.server_config) if args.server_config else None,
        "traces": "otlp to a loopback sink" if args.traces else "off",
        "api_keys": "on (every request carries a key)" if args.api_keys else "off",
        "db_kind": db_kind(db),
        "db": db if args.db else "(temporary sqlite file)",
        "replicas": replicas,
        "redis": args.redis,
        "repeats": mode.repeats,
        "window_s": mode.window_s,
        "concurrencies": list(mode.concurrencies),
        "turns_per_session": mode.turns_per_session,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _profile(suite: Suite, servers: Replicas, out: Path, seconds: float) -> dict[str, Any]:
    """Sample the (first) server (``py-spy --gil``: where the GIL-holding thread spends its time) under load."""
    spy = PySpy(servers.first.pid, out, gil=True)
    jobs = [
        {"name": name, "scenario": name, "concurrency": 32, "duration": seconds, "params": {"turns_per_session": 20}}
        for name in ("turn", "tool_turn")
    ]
    spy.start()
    try:
        suite.loadgen(jobs, repeats=1)
    finally:
        spy.stop()
    summary = summarise(out)
    summary.update(raw_file=str(out), workload=f"turn and tool_turn, c=32, {seconds:g}s each", sampler="py-spy --gil")
    if len(servers) > 1:
        summary["sampled"] = f"replica 1 of {len(servers)}"
    return summary


def run_knowledge(args: argparse.Namespace, name: str) -> int:
    """Measure the chunk index (``--knowledge``): no server, the stores called in process."""
    began = time.monotonic()
    meta = _meta(select(name, args.repeats, args.window), args, args.db or "sqlite")
    meta.update(knowledge.describe(args.vectors))
    only = args.backends or BACKENDS
    given = {"sqlite": True, "postgres": bool(args.postgres), "redis": bool(args.redis)}
    meta["knowledge.backends"] = [backend for backend in BACKENDS if backend in only and given[backend]]
    meta["knowledge.bulk"] = args.bulk
    with tempfile.TemporaryDirectory(prefix="ferryman-bench-") as tmp_name:
        figures = knowledge.run_knowledge(
            name, Path(tmp_name), args.postgres, args.redis, args.full, args.vectors, args.sizes, only, args.bulk
        )
    meta["duration_s"] = round(time.monotonic() - began, 1)
    write_table(figures, meta)
    write_json(args.out, figures, meta, None)
    note(f"done in {meta['duration_s']}s; results in {args.out}")
    return 0


def run_tool_use(args: argparse.Namespace) -> int:
    """Score a model's tool use (``--tool-use``): no server, the embedded provider called in process."""
    began = time.monotonic()
    report = asyncio.run(tool_use.run_tool_use(args.model, args.limit))
    sys.stdout.write(report.table() + "\n")
    out = args.out if args.out != DEFAULT_OUT else DEFAULT_OUT.with_name("tool_use.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report.as_json(), indent=2) + "\n")
    note(f"done in {time.monotonic() - began:.0f}s; results in {out}")
    return 0


def _trace_sink() -> TraceSink:
    """Start the loopback OTLP sink and point the server's exporter at it (its environment is this one's)."""
    sink = TraceSink().start()
    os.environ.update({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint})
    return sink


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by the parsed arguments; return the exit status."""
    if args.tool_use:
        return run_tool_use(args)
    name = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.knowledge:
        return run_knowledge(args, name)
    if args.full or args.sizes or args.backends or args.bulk:
        raise SystemExit("bench: --full, --sizes, --backends and --bulk say what --knowledge measures; they take it")
    refusal = replica_refusal(args.replicas, args.db, args.redis)
    if refusal:
        raise SystemExit(f"bench: {refusal}")
    mode = select(name, args.repeats, args.window)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ferryman-bench-") as tmp_name:
        tmp = Path(tmp_name)
        db = args.db or str(tmp / "bench.db")
        stub, stub_root = stub_process(tmp, DEFAULT_REPLY, routed=args.stub == "routed")
        if args.api_keys and args.server_config:
            raise SystemExit("bench: --api-keys writes its own server config; it takes no --server-config")
        headers = _api_key(tmp, db) if args.api_keys else {}
        config_file = tmp / "api-keys.yaml" if args.api_keys else args.server_config
        config = ["--config", str(config_file)] if config_file else []
        sink = _trace_sink() if args.traces else None
        servers = Replicas(tmp, db, stub_root, args.replicas, args.redis, extra=config)
        meta = _meta(mode, args, db, len(servers))
        profile: dict[str, Any] | None = None
        try:
            replicas = f" ({len(servers)} replicas)" if len(servers) > 1 else ""
            note(f"mode {mode.name}: starting the stub and ferryman{replicas} on 127.0.0.1")
            stub.start()
            servers.start()
            suite = Suite(mode, Target(stub, stub_root, servers, enqueue=args.stub == "queue", headers=headers))
            for phase in (suite.memory_and_listing, suite.throughput, suite.latency, suite.history):
                note(f"phase {phase.__name__} ({time.monotonic() - began:.0f}s elapsed)")
                phase()
            suite.rss("rss_after_run", "server RSS at the end of the run")
            if args.profile:
                note("profiling the server under load with py-spy")
                raw = args.out.with_name(args.out.stem + "-profile.txt")
                raw.parent.mkdir(parents=True, exist_ok=True)
                profile = _profile(suite, servers, raw, args.profile_seconds)
        except Exception:
            sys.stderr.write(f"{servers.log_tails()}--- {stub.name} log (tail) ---\n{stub.log_tail()}\n")
            raise
        finally:
            servers.stop()
            stub.stop()
            if sink is not None:
                sink.stop()
                meta.update({f"traces.{k}": v for k, v in sink.counts.items()})
    meta["duration_s"] = round(time.monotonic() - began, 1)
    meta.update({f"info.{k}": v for k, v in suite.info.items()})
    write_table(suite.figures, meta)
    if profile is not None:
        write_profile(profile)
    write_json(args.out, suite.figures, meta, profile)
    note(f"done in {meta['duration_s']}s; results in {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench``."""
    return run(_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
