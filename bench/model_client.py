"""``python -m bench.model_client``: CPU of one streamed chat completion, per model client, side by side.

The turn's model call is made by ``inference/http1.py`` (the lean client); before, by the ``openai`` SDK over
httpx. This streams the same chat completion from the bench's stub (a separate process, so only the client's
CPU is counted) through each, interleaved in rounds, and prints the CPU per call of each and their ratio:

* ``sdk``: the provider given an httpx client, which takes the SDK's path (as with a proxy);
* ``lean``: the provider as ``ferryman serve`` builds it;
* ``httpx``: httpx alone, with the same body and line-by-line SSE reading (what "httpx directly" would cost).

Nothing here runs as a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2

from ferryman.api.content import UserMessage
from ferryman.inference.base import ChatRequest
from ferryman.inference.openai_remote import OpenAICompatibleProvider
from ferryman.inference.openai_wire import message_param

from .procs import stub_process

Call = Callable[[], Awaitable[None]]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _per_call_ms(call: Call, calls: int) -> float:
    started = _cpu()
    for _ in range(calls):
        await call()
    return (_cpu() - started) / calls * 1000


def _clients(base_url: str, request: ChatRequest) -> tuple[dict[str, Call], list[Callable[[], Awaitable[None]]]]:
    sdk = OpenAICompatibleProvider("bench", base_url, http_client=httpx2.AsyncClient(timeout=120))
    lean = OpenAICompatibleProvider("bench", base_url)
    plain = httpx2.AsyncClient(timeout=120)
    body = json.dumps(lean._params(request, [message_param(m) for m in request.messages])).encode()
    headers = {"authorization": "Bearer none", "content-type": "application/json"}

    async def through(provider: OpenAICompatibleProvider) -> None:
        async for _ in provider.stream_chat(request):
            pass

    async def httpx_alone() -> None:
        async with plain.stream("POST", f"{base_url}/chat/completions", content=body, headers=headers) as answer:
            async for line in answer.aiter_lines():
                if line.startswith("data:") and line[5:].strip() != "[DONE]":
                    json.loads(line[5:])

    calls: dict[str, Call] = {
        "sdk": lambda: through(sdk),
        "lean": lambda: through(lean),
        "httpx": httpx_alone,
    }
    return calls, [sdk.aclose, lean.aclose, plain.aclose]


async def _measure(base_url: str, calls: int, rounds: int) -> dict[str, list[float]]:
    request = ChatRequest(model="bench", messages=[UserMessage(content="hello " * 50)])
    clients, closers = _clients(base_url, request)
    figures: dict[str, list[float]] = {name: [] for name in clients}
    try:
        for call in clients.values():
            await _per_call_ms(call, 50)  # warm-up: connections, caches
        for _ in range(rounds):
            for name, call in clients.items():
                figures[name].append(await _per_call_ms(call, calls))
    finally:
        for close in closers:
            await close()
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print it."""
    parser = argparse.ArgumentParser(prog="python -m bench.model_client", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per client per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as logs:
        stub, root = stub_process(Path(logs), "The answer is 42.")
        base_url = f"{root}/v1"
        stub.start()
        try:
            figures = asyncio.run(_measure(base_url, args.calls, args.rounds))
        finally:
            stub.stop()
    medians = {name: statistics.median(values) for name, values in figures.items()}
    lines = [f"client CPU per streamed chat completion, medians of {args.rounds} rounds of {args.calls} calls"]
    for name, value in medians.items():
        lines.append(f"  {name:6} {value:7.3f} ms   ({value / medians['sdk']:.2f}x the SDK)")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
