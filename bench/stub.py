"""The inference stub: ferryman's scripted OpenAI-compatible app, routed by message content.

``python -m bench.stub --port P --default-reply TEXT`` serves the very app of
``python -m ferryman.testing.server`` (``build_app``), with one difference in
how a request picks its reply:

* a request whose last message is a user message containing ``[bench:call=NAME]``
  answers with one call of tool ``NAME`` (arguments from :data:`TOOL_ARGUMENTS`);
* otherwise the queue of ``POST /scripted/replies`` is used, then the default reply.

Why not only the queue? The queue is one FIFO shared by every request. Under
concurrency a reply queued by worker A for its turn is popped by whichever
inference request arrives first -- often the *second* inference step of worker
B's tool turn -- so B runs three inference steps and A one. The totals are
right but per-turn shapes and latencies are not; a turn can even chain calls up
to ``max_infer_iters``. Routing by content makes each turn's shape depend only on
its own messages, and saves the load generator one HTTP request per tool turn.

The stub also keeps only the last :data:`KEEP_REQUESTS` requests (the plain server
keeps all of them, which grows without bound over a long benchmark).
"""

from __future__ import annotations

import argparse
import itertools
import re
from typing import Any

import uvicorn

from ferryman.testing.scripted import Script, ScriptedReply, ScriptedToolCall
from ferryman.testing.server import build_app

KEEP_REQUESTS = 32
MARKER = re.compile(r"\[bench:call=([A-Za-z0-9_.-]+)\]")
TOOL_ARGUMENTS: dict[str, dict[str, Any]] = {
    "calculator": {"expression": "6*7"},
    "get_weather": {"city": "Paris"},
}


def call_marker(tool_name: str) -> str:
    """The text to put in a user message to make the stub call ``tool_name``."""
    return f"[bench:call={tool_name}]"


class _RecentRequests(list[dict[str, Any]]):
    """A list that keeps only its last :data:`KEEP_REQUESTS` items."""

    def append(self, item: dict[str, Any]) -> None:
        super().append(item)
        if len(self) > KEEP_REQUESTS:
            del self[0]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class RoutedScript(Script):
    """A :class:`Script` whose reply depends on the request's last message.

    Args:
        default_reply: The answer when no marker and nothing queued.
    """

    def __init__(self, default_reply: ScriptedReply) -> None:
        super().__init__(default_reply=default_reply)
        self.requests = _RecentRequests()
        self._call_ids = itertools.count(1)

    async def next_reply(self, request_record: dict[str, Any]) -> ScriptedReply:
        """A tool call if the last user message asks for one, else the queue or the default."""
        messages = request_record.get("messages") or []
        last = messages[-1] if messages else {}
        match = MARKER.search(_text_of(last.get("content"))) if last.get("role") == "user" else None
        if match is None:
            return await super().next_reply(request_record)
        self.requests.append(request_record)
        name = match.group(1)
        call = ScriptedToolCall(
            name=name, arguments=TOOL_ARGUMENTS.get(name, {}), call_id=f"call_bench_{next(self._call_ids)}"
        )
        return ScriptedReply(tool_calls=[call])


def main(argv: list[str] | None = None) -> None:
    """Serve the routed stub until interrupted."""
    parser = argparse.ArgumentParser(description="ferryman bench inference stub (content-routed)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", action="append", dest="models", help="model id to list")
    parser.add_argument("--default-reply", default="ok", help="answer when no tool call is asked for")
    args = parser.parse_args(argv)
    script = RoutedScript(ScriptedReply(text=args.default_reply, chunks=1))
    app = build_app(script, args.models or ["scripted-model"])
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
