"""An OpenAI-compatible HTTP server that answers from a script.

Run it with ``python -m ferryman.testing.server --port 9000`` and point
``ferryman serve --inference-url http://127.0.0.1:9000/v1`` at it. Tests
enqueue replies over ``POST /scripted/replies`` (see
:class:`~ferryman.testing.ScriptedServerClient`). With ``--default-reply`` it
answers every request that finds the queue empty, which makes it a fast,
deterministic inference stub for benchmarks. An embeddings request whose input
holds ``[[hold:NAME]]`` is answered once gate ``NAME`` opens (a test holds a
server's work mid-way with it, as a gated reply holds a chat request).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .scripted import Script, ScriptedReply, ScriptedToolCall

WAIT_SECONDS = 15.0
"""How long ``GET /scripted/requests?at_least=N`` waits for the Nth request."""
HOLD = re.compile(r"\[\[hold:([\w-]+)\]\]")
"""Marks an embedding input that waits for the gate it names."""


def _tool_call_json(call: ScriptedToolCall, index: int, request_no: int) -> dict[str, Any]:
    return {
        "index": index,
        "id": call.call_id or f"call_{request_no}_{index}",
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_text()},
    }


def _usage(body: dict[str, Any], reply: ScriptedReply) -> dict[str, int]:
    prompt = sum(len(str(m.get("content") or "").split()) for m in body.get("messages", []))
    completion = len(reply.text.split())
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _completion(body: dict[str, Any], reply: ScriptedReply, request_no: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [_tool_call_json(call, i, request_no) for i, call in enumerate(reply.tool_calls)]
    return {
        "id": f"chatcmpl-{request_no}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason()}],
        "usage": _usage(body, reply),
    }


def _chunk(body: dict[str, Any], request_no: int, delta: dict[str, Any], finish: str | None) -> str:
    chunk = {
        "id": f"chatcmpl-{request_no}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\n"


async def _stream(script: Script, body: dict[str, Any], reply: ScriptedReply, request_no: int) -> AsyncIterator[str]:
    yield _chunk(body, request_no, {"role": "assistant", "content": ""}, None)
    async for piece in script.text_stream(reply):
        yield _chunk(body, request_no, {"content": piece}, None)
    for index, call in enumerate(reply.tool_calls):
        head = _tool_call_json(call, index, request_no)
        head["function"] = {"name": call.name, "arguments": ""}
        yield _chunk(body, request_no, {"tool_calls": [head]}, None)
        args = {"index": index, "function": {"arguments": call.arguments_text()}}
        yield _chunk(body, request_no, {"tool_calls": [args]}, None)
    yield _chunk(body, request_no, {}, reply.finish_reason())
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {
            "id": f"chatcmpl-{request_no}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [],
            "usage": _usage(body, reply),
        }
        yield f"data: {json.dumps(usage)}\n\n"
    yield "data: [DONE]\n\n"


def _vector(text: str, size: int = 8) -> list[float]:
    """A deterministic stand-in embedding: byte sums of the text, spread over ``size`` slots."""
    slots = [0.0] * size
    for i, byte in enumerate(text.encode()):
        slots[i % size] += byte / 255
    return slots


def build_app(script: Script, model_ids: list[str], max_model_len: int | None = None) -> Starlette:
    """The scripted server's ASGI app; ``max_model_len``, when given, is published in its model list, as vLLM does."""
    published = {} if max_model_len is None else {"max_model_len": max_model_len}

    async def models(request: Request) -> Response:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "scripted", **published} for m in model_ids]
        return JSONResponse({"object": "list", "data": data})

    async def chat(request: Request) -> Response:
        body = await request.json()
        record = dict(body)
        record["headers"] = {"authorization": request.headers.get("authorization", "")}
        if "traceparent" in request.headers:  # the trace ferryman continues here, when it traces
            record["headers"]["traceparent"] = request.headers["traceparent"]
        try:
            reply = await script.next_reply(record)
        except LookupError as exc:
            return JSONResponse({"error": {"message": str(exc)}}, status_code=500)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.error is not None:
            error = {"error": {"message": reply.error.message, "type": "scripted"}}
            wait = reply.error.retry_after_ms
            headers = None if wait is None else {"retry-after-ms": str(wait)}
            return JSONResponse(error, status_code=reply.error.status_code, headers=headers)
        request_no = len(script.requests)
        if body.get("stream"):
            return StreamingResponse(_stream(script, body, reply, request_no), media_type="text/event-stream")
        return JSONResponse(_completion(body, reply, request_no))

    async def enqueue(request: Request) -> Response:
        items = await request.json()
        script.enqueue(*(ScriptedReply.model_validate(item) for item in items))
        return JSONResponse({"queued": len(script.replies)})

    async def requests_seen(request: Request) -> Response:
        # ``at_least=N`` answers once N requests arrived: tests wait on that instead of polling.
        at_least = int(request.query_params.get("at_least", "0"))
        try:
            async with asyncio.timeout(WAIT_SECONDS):
                seen = await script.wait_for_requests(at_least)
        except TimeoutError:
            return JSONResponse({"error": {"message": f"fewer than {at_least} requests arrived"}}, status_code=504)
        return JSONResponse({"data": seen, "queued": len(script.replies)})

    async def open_gate(request: Request) -> Response:
        script.open_gate(request.path_params["name"])
        return JSONResponse({"opened": request.path_params["name"]})

    async def embeddings(request: Request) -> Response:
        body = await request.json()
        await script.record(
            {"embeddings": body, "headers": {"authorization": request.headers.get("authorization", "")}}
        )
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        for gate in sorted({name for text in texts for name in HOLD.findall(str(text))}):
            await script.gate(gate).wait()
        data = [{"object": "embedding", "index": i, "embedding": _vector(text)} for i, text in enumerate(texts)]
        usage = {
            "prompt_tokens": sum(len(t.split()) for t in texts),
            "total_tokens": sum(len(t.split()) for t in texts),
        }
        return JSONResponse({"object": "list", "data": data, "model": body.get("model", ""), "usage": usage})

    async def problems(request: Request) -> Response:
        allow_unused = request.query_params.get("allow_unused", "false").lower() == "true"
        return JSONResponse({"problems": script.problems(allow_unused)})

    async def reset(request: Request) -> Response:
        script.reset()
        return JSONResponse({"reset": True})

    return Starlette(
        routes=[
            Route("/v1/models", models),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/scripted/replies", enqueue, methods=["POST"]),
            Route("/scripted/requests", requests_seen),
            Route("/scripted/gates/{name}/open", open_gate, methods=["POST"]),
            Route("/scripted/problems", problems),
            Route("/scripted/reset", reset, methods=["POST"]),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    """Run the scripted server until interrupted."""
    parser = argparse.ArgumentParser(description="OpenAI-compatible scripted model server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--model", action="append", dest="models", help="model id to list")
    parser.add_argument("--default-reply", help="answer with this text when nothing is queued")
    args = parser.parse_args(argv)
    default = ScriptedReply(text=args.default_reply, chunks=1) if args.default_reply else None
    app = build_app(Script(default_reply=default), args.models or ["scripted-model"])
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
