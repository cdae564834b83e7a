"""Workloads: what one operation of each scenario sends, times and checks.

A scenario is prepared once per job (e.g. it creates its agent), gives each
concurrent worker its own state (a session: a session runs one turn at a time),
and performs operations. An operation times only the request(s) it measures and
raises :class:`OpError` when the answer is not what the workload expects, so
errors are counted rather than timed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import EventSource

from .stub import call_marker

MODEL = "scripted-model"
INSTRUCTIONS = "You are a benchmark agent. Answer briefly."
WEATHER_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather of a city",
    "parameters": [{"name": "city", "parameter_type": "string", "description": "c", "required": True}],
}
ONE_STEP = ["inference"]
TOOL_STEPS = ["inference", "tool_execution", "inference"]


class OpError(Exception):
    """An operation whose answer was wrong; ``kind`` names the counter it goes to."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


@dataclass
class Outcome:
    """A successful operation: its measured latency and any further timings (ms)."""

    latency_ms: float
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class Worker:
    """One concurrent client's state, with its own HTTP client.

    Each worker has its own client rather than sharing one pool: httpx 0.28's
    shared pool costs grow with the number of requests in flight (at 32 and more
    the load generator, not the server, becomes the bottleneck).

    With several replicas (``bases``), the worker talks to one of them at a time, as
    through a sticky round-robin balancer: session number ``index + k * stride``
    (its k-th session; ``stride``: the job's concurrency) goes to
    ``bases[number % len(bases)]``, and all its turns with it. When the concurrency
    is a multiple of the replica count, worker i stays on ``bases[i % N]``; at
    concurrency 1, successive sessions go to successive replicas.
    """

    index: int
    http: httpx.AsyncClient
    bases: Sequence[str] = ()
    stride: int = 1
    base: str = ""
    """The ``/v1`` URL of its replica now (empty: the scenario's own base)."""
    sessions_opened: int = 0
    session_id: str = ""
    turns_in_session: int = 0
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.bases:
            self.base = self.bases[self.index % len(self.bases)]

    def next_session(self) -> None:
        """Move to the replica of the worker's next session, and count it."""
        if self.bases:
            self.base = self.bases[(self.index + self.sessions_opened * self.stride) % len(self.bases)]
        self.sessions_opened += 1


def ms_since(start: float) -> float:
    """Milliseconds elapsed since ``start`` (a ``time.perf_counter()`` reading)."""
    return (time.perf_counter() - start) * 1000.0


def json_of(response: httpx.Response) -> Any:
    """The JSON body of a 200 answer.

    Raises:
        OpError: any other status (counted as ``http_<status>``).
    """
    if response.status_code != 200:
        raise OpError(f"http_{response.status_code}", response.text[:200])
    return response.json()


class Scenario:
    """Base of the scenarios; subclasses override :meth:`op` and maybe the hooks.

    Args:
        http: The job's client, for :meth:`prepare` (workers have their own).
        base: ferryman's ``/v1`` URL, for :meth:`prepare` (workers may talk to other replicas).
        stub: The stub's root URL.
        params: The job's parameters from the load generator's spec.
    """

    agent_config: dict[str, Any] = {"toolgroups": ["builtin::math"]}
    on_replicas = True
    """Whether its operations go to ferryman's replicas (``False``: straight to the stub)."""

    def __init__(self, http: httpx.AsyncClient, base: str, stub: str, params: dict[str, Any]) -> None:
        self.http, self.base, self.stub, self.params = http, base, stub, params
        self.agent_id: str = params.get("agent_id", "")
        self.turns_per_session: int = int(params.get("turns_per_session", 20))

    async def prepare(self) -> dict[str, Any]:
        """Once per job, before any worker: create the agent unless one is given."""
        if not self.agent_id:
            body = {"agent_config": {"model": MODEL, "instructions": INSTRUCTIONS, **self.agent_config}}
            self.agent_id = json_of(await self.http.post(f"{self.base}/agents", json=body))["agent_id"]
        return {"agent_id": self.agent_id}

    async def setup_worker(self, worker: Worker) -> None:
        """Once per worker and per run when ``fresh_sessions`` is set: open its session."""
        await self.new_session(worker)

    def base_of(self, worker: Worker) -> str:
        """The ``/v1`` URL the worker talks to (its replica's)."""
        return worker.base or self.base

    async def new_session(self, worker: Worker) -> None:
        """Give the worker a fresh session, on the replica its next session goes to (untimed)."""
        worker.next_session()
        url = f"{self.base_of(worker)}/agents/{self.agent_id}/session"
        response = await worker.http.post(url, json={"session_name": f"bench-{worker.index}"})
        worker.session_id = json_of(response)["session_id"]
        worker.turns_in_session = 0

    async def rotate(self, worker: Worker) -> None:
        """Open a new session every ``turns_per_session`` turns, so history stays short (untimed)."""
        if self.turns_per_session and worker.turns_in_session >= self.turns_per_session:
            await self.new_session(worker)
        worker.turns_in_session += 1

    def turn_url(self, worker: Worker) -> str:
        """URL of the worker's session's turns."""
        return f"{self.base_of(worker)}/agents/{self.agent_id}/session/{worker.session_id}/turn"

    async def op(self, worker: Worker) -> Outcome:
        """One measured operation."""
        raise NotImplementedError


def _check_turn(turn: dict[str, Any], status: str, steps: list[str] | None) -> None:
    if turn.get("status") != status:
        raise OpError("status", f"turn status {turn.get('status')!r}, expected {status!r}")
    if steps is not None and [s["step_type"] for s in turn.get("steps", [])] != steps:
        raise OpError("shape", f"steps {[s['step_type'] for s in turn.get('steps', [])]}, expected {steps}")


class TurnScenario(Scenario):
    """A non-streaming turn answered by one inference step."""

    content = "hi"
    expected_steps: list[str] | None = ONE_STEP

    async def before(self, worker: Worker) -> None:
        """Untimed work before the request (queue mode enqueues a reply here)."""

    async def op(self, worker: Worker) -> Outcome:
        """POST a turn with ``stream: false`` and check it completed with the expected steps."""
        await self.rotate(worker)
        await self.before(worker)
        body = {"messages": [{"role": "user", "content": self.content}], "stream": False}
        start = time.perf_counter()
        response = await worker.http.post(self.turn_url(worker), json=body)
        latency = ms_since(start)
        _check_turn(json_of(response), "completed", self.expected_steps)
        return Outcome(latency)


class ToolTurnScenario(TurnScenario):
    """A turn whose model calls the server-side calculator once: two inference steps."""

    content = f"What is 6*7? {call_marker('calculator')}"
    expected_steps = TOOL_STEPS

    async def before(self, worker: Worker) -> None:
        """With ``enqueue`` (plain stub), queue the tool-call reply this turn should get."""
        if self.params.get("enqueue"):
            reply = [{"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]}]
            (await worker.http.post(f"{self.stub}/scripted/replies", json=reply)).raise_for_status()


class HistoryScenario(TurnScenario):
    """Sequential turns in one session, never rotated: turn N sees 2(N-1) earlier messages.

    At each turn named in the ``direct_at`` parameter, the request ferryman sent the stub for it is posted
    straight to the stub :data:`DIRECT_REPEATS` times as well (untimed in the turn's latency): their median is
    the extra ``direct_N``, what the same prompt costs the stub alone, which grows with the history too.
    """

    async def rotate(self, worker: Worker) -> None:
        """History must grow: no rotation."""
        worker.turns_in_session += 1

    async def op(self, worker: Worker) -> Outcome:
        """A turn; at a checkpoint, the direct calls with its prompt too."""
        outcome = await super().op(worker)
        turn = worker.turns_in_session
        if turn in self.params.get("direct_at", ()):
            outcome.extra[f"direct_{turn}"] = await self._direct(worker)
        return outcome

    async def _direct(self, worker: Worker) -> float:
        seen = json_of(await worker.http.get(f"{self.stub}/scripted/requests"))["data"]
        payload = {k: v for k, v in seen[-1].items() if k not in ("headers", "stream_options")}
        payload["stream"] = False
        times = []
        for _ in range(DIRECT_REPEATS):
            start = time.perf_counter()
            response = await worker.http.post(f"{self.stub}/v1/chat/completions", json=payload)
            times.append(ms_since(start))
            if not json_of(response).get("choices"):
                raise OpError("shape", "no choices")
        return statistics.median(times)


DIRECT_REPEATS = 5


class StreamTurnScenario(TurnScenario):
    """A streaming turn: time to the first SSE event and to ``turn_complete``."""

    async def op(self, worker: Worker) -> Outcome:
        """POST a turn with ``stream: true`` and read the SSE stream to its end."""
        await self.rotate(worker)
        body = {"messages": [{"role": "user", "content": self.content}], "stream": True}
        start = time.perf_counter()
        first = done = None
        async with worker.http.stream("POST", self.turn_url(worker), json=body) as response:
            if response.status_code != 200:
                await response.aread()
                raise OpError(f"http_{response.status_code}", response.text[:200])
            async for event in EventSource(response).aiter_sse():
                if first is None:
                    first = ms_since(start)
                if '"error"' in event.data[:10]:
                    raise OpError("stream_error", event.data[:200])
                if '"turn_complete"' in event.data:
                    done = ms_since(start)
        if first is None or done is None:
            raise OpError("shape", "stream ended without turn_complete")
        return Outcome(done, {"first_event": first, "turn_complete": done})


class ClientToolScenario(TurnScenario):
    """A turn that pauses on a client tool, then its resume: the whole round trip."""

    agent_config: dict[str, Any] = {"client_tools": [WEATHER_TOOL]}
    content = f"Weather in Paris? {call_marker('get_weather')}"

    async def op(self, worker: Worker) -> Outcome:
        """Turn -> ``awaiting_input`` -> resume with the tool's answer -> ``completed``."""
        await self.rotate(worker)
        if self.params.get("enqueue"):
            reply = [{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}]
            (await worker.http.post(f"{self.stub}/scripted/replies", json=reply)).raise_for_status()
        body = {"messages": [{"role": "user", "content": self.content}], "stream": False}
        start = time.perf_counter()
        paused = json_of(await worker.http.post(self.turn_url(worker), json=body))
        turn_ms = ms_since(start)
        _check_turn(paused, "awaiting_input", None)
        calls = (paused.get("output_message") or {}).get("tool_calls") or []
        if len(calls) != 1:
            raise OpError("shape", f"expected one pending call, got {len(calls)}")
        resume = {
            "tool_responses": [{"call_id": calls[0]["call_id"], "tool_name": "get_weather", "content": "sunny"}],
            "stream": False,
        }
        middle = time.perf_counter()
        done = json_of(await worker.http.post(f"{self.turn_url(worker)}/{paused['turn_id']}/resume", json=resume))
        resume_ms = ms_since(middle)
        _check_turn(done, "completed", TOOL_STEPS)
        total = ms_since(start)
        return Outcome(total, {"turn": turn_ms, "resume": resume_ms})


class DirectScenario(Scenario):
    """The same chat completion ferryman sends, posted straight to the stub, non-streaming."""

    on_replicas = False

    async def prepare(self) -> dict[str, Any]:
        """Capture the exact request a one-step ferryman turn sends upstream."""
        info = await super().prepare()
        worker = Worker(-1, self.http)
        await self.new_session(worker)
        body = {"messages": [{"role": "user", "content": TurnScenario.content}], "stream": False}
        json_of(await self.http.post(self.turn_url(worker), json=body))
        seen = json_of(await self.http.get(f"{self.stub}/scripted/requests"))["data"]
        payload = {k: v for k, v in seen[-1].items() if k not in ("headers", "stream_options")}
        payload["stream"] = False
        self.payload = payload
        return {**info, "payload_messages": len(payload.get("messages", []))}

    async def setup_worker(self, worker: Worker) -> None:
        """No session needed."""

    async def op(self, worker: Worker) -> Outcome:
        """POST ``/v1/chat/completions`` to the stub."""
        start = time.perf_counter()
        response = await worker.http.post(f"{self.stub}/v1/chat/completions", json=self.payload)
        latency = ms_since(start)
        if not json_of(response).get("choices"):
            raise OpError("shape", "no choices")
        return Outcome(latency)


TURN_SCENARIOS: dict[str, type[Scenario]] = {
    "direct": DirectScenario,
    "turn": TurnScenario,
    "tool_turn": ToolTurnScenario,
    "history": HistoryScenario,
    "stream_turn": StreamTurnScenario,
    "client_tool": ClientToolScenario,
}
